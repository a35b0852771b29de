/* fw.h: output and exit of a bare-metal program (startup.c implements
 * them with Arm semihosting). */
#ifndef FW_H
#define FW_H

void fw_puts(const char *s);
void fw_exit(int status);

#endif
