# bash completion for remat: commands, each command's flags (read from
# `remat help COMMAND`, so never out of date), policy names, the values of
# --optimizer and --by, and files. make install puts it where
# bash-completion loads it (share/bash-completion/completions/remat); or
# source it from ~/.bashrc.
_remat() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    local cmds="compile schedule diff build pareto memory import calibrate ops help"
    COMPREPLY=()
    if [ "$COMP_CWORD" -eq 1 ]; then
        mapfile -t COMPREPLY < <(compgen -W "$cmds --help --version" -- "$cur")
        return
    fi
    local cmd=${COMP_WORDS[1]}
    case $prev in
        --policy)
            mapfile -t COMPREPLY < <(compgen -W "none full sac sac-aggressive" -- "$cur"
                                     compgen -f -X '!*.xml' -- "$cur")
            return ;;
        --optimizer)
            mapfile -t COMPREPLY < <(compgen -W "sgd adamw" -- "$cur")
            return ;;
        --by)
            mapfile -t COMPREPLY < <(compgen -W "saved arena" -- "$cur")
            return ;;
    esac
    if [ "$cmd" = help ]; then
        mapfile -t COMPREPLY < <(compgen -W "$cmds" -- "$cur")
    elif [[ $cur == -* ]]; then
        local flags
        flags=$("${COMP_WORDS[0]}" help "$cmd" 2>/dev/null |
                grep -oE -- '(^|[ [])--?[a-z][a-z0-9-]*' | sed 's/^[ [ ]*//' | sort -u)
        mapfile -t COMPREPLY < <(compgen -W "$flags --help" -- "$cur")
    else
        mapfile -t COMPREPLY < <(compgen -f -- "$cur")
    fi
}
complete -o filenames -o bashdefault -F _remat remat
