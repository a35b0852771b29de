"""Finding the remat program and running its commands.

Every function of the package that plans or builds runs the installed
compiler (it is C; this package only drives it) and turns what it prints
into Python values. Its options are spelled as keyword arguments:
``max_arena=250000`` is ``--max-arena 250000``, ``freeze=["fc1.*"]`` one
``--freeze`` per glob, ``fused=True`` the bare flag.
"""
import json
import os
import shutil
import subprocess


class RematError(Exception):
    """The compiler or a trainer refused: its own one-line message, the
    command that ran and its exit status (1: bad input, 2: bad usage)."""

    def __init__(self, message, command=None, status=None):
        super().__init__(message)
        self.command = command
        self.status = status


def compiler():
    """The remat program this package runs: $REMAT if set; else the one
    installed beside this package (PREFIX/bin/remat for a package under
    PREFIX/lib/python3*/...); else the build/remat of the source tree this
    package sits in; else `remat` on PATH."""
    env = os.environ.get("REMAT")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    # the source tree: python/remat -> build/remat
    tree = os.path.normpath(os.path.join(here, "..", "..", "build", "remat"))
    if os.path.basename(os.path.dirname(here)) == "python" and \
            os.access(tree, os.X_OK):
        return tree
    # installed: PREFIX/lib/python3*/{dist,site}-packages/remat -> PREFIX/bin
    lib, pyver, packages = here.split(os.sep)[-4:-1]
    if packages in ("dist-packages", "site-packages") and \
            pyver.startswith("python3") and lib == "lib":
        path = os.path.normpath(os.path.join(here, "..", "..", "..", "..",
                                             "bin", "remat"))
        if os.access(path, os.X_OK):
            return path
    found = shutil.which("remat")
    if found:
        return found
    raise RematError("no remat program: install remat (make install), build "
                     "it (make), or set REMAT to its path")


def run(args, what=None):
    """Runs a command; its standard output, or RematError with its message
    (the last line of standard error) when it fails."""
    try:
        r = subprocess.run([str(a) for a in args], capture_output=True,
                           text=True)
    except OSError as e:
        raise RematError(f"cannot run {args[0]}: {e.strerror}",
                         command=args) from None
    if r.returncode < 0:
        raise RematError(_killed(what or args[0], -r.returncode),
                         command=args, status=r.returncode)
    if r.returncode != 0:
        # the program's own line; a usage error ends with a hint to --help
        lines = [line for line in (r.stderr.strip() or r.stdout.strip())
                 .splitlines() if not line.startswith("try '")]
        raise RematError(lines[-1] if lines else
                         f"{what or args[0]} failed (exit {r.returncode})",
                         command=args, status=r.returncode)
    return r.stdout


def _killed(what, sig):
    import signal
    try:
        name = signal.Signals(sig).name
    except ValueError:
        name = f"signal {sig}"
    why = ""
    if name == "SIGILL":
        why = (": remat build makes a trainer for the machine that builds it "
               "(-march=native); build it again on this one")
    return f"{what} was killed by {name}{why}"


# the compiler's options; freeze and policy may be lists (a flag each)
_FLAGS = ("policy", "budget", "max_arena", "max_ram", "optimizer", "momentum",
          "fused", "seed", "conv_scratch", "name", "by", "measure", "no_blas",
          "cflags", "mpi", "fma", "freeze")


def flags(known=_FLAGS, **options):
    """Command-line flags from keyword options (max_arena=N is
    --max-arena N): None and False are left out, True is the bare flag, a
    list or tuple repeats the flag per item (--freeze per glob, --policy
    twice for diff). An option not in known is a TypeError."""
    out = []
    for key, value in options.items():
        if key not in known:
            raise TypeError(f"unknown option {key!r}; remat takes "
                            f"{', '.join(known)}")
        if value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            out.append(flag)
        elif isinstance(value, (list, tuple)):
            for v in value:
                out += [flag, str(v)]
        else:
            out += [flag, str(value)]
    return out


def command(cmd, model, *extra, **options):
    """`remat CMD MODEL FLAGS... EXTRA...`'s standard output."""
    return run([compiler(), cmd, os.fspath(model)] + flags(**options)
               + list(extra), what=f"remat {cmd}")


def command_json(cmd, model, *extra, **options):
    return json.loads(command(cmd, model, "--json", *extra, **options))
