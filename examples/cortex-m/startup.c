/*
 * startup.c: what a bare-metal Cortex-M program needs before main, here for
 * qemu's mps2-an386 board (the example's firmware, and the firmware tests'
 * programs, tests/firmware/): the vector table, a reset handler that turns
 * the FPU on, copies .data and zeroes .bss, and output and exit through Arm
 * semihosting (a BKPT 0xAB that the debugger, here qemu -semihosting,
 * serves). No C library start-up code runs; newlib is linked only for
 * memcpy, memset and libm. On a board of your own, the vendor's start-up
 * file takes its place, and fw_puts writes to a UART.
 */
#include <stdint.h>
#include <string.h>

#include "fw.h"

extern uint32_t __data_load[], __data_start[], __data_end[];
extern uint32_t __bss_start[], __bss_end[], __stack_top[];
int main(void);
void Reset_Handler(void);
void Fault_Handler(void);

/* Arm semihosting: operation in r0, its argument in r1, result in r0. */
static int semihost(int op, const void *arg)
{
    register int r0 __asm__("r0") = op;
    register const void *r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

#define SYS_WRITE0 0x04
#define SYS_EXIT 0x18
#define ADP_STOPPED_APPLICATION_EXIT 0x20026
#define ADP_STOPPED_RUNTIME_ERROR 0x20023

void fw_puts(const char *s)
{
    semihost(SYS_WRITE0, s);
}

/* qemu exits with status 0 for ApplicationExit, 1 for any other reason. */
void fw_exit(int status)
{
    semihost(SYS_EXIT, (const void *)(uintptr_t)(status == 0
                                                     ? ADP_STOPPED_APPLICATION_EXIT
                                                     : ADP_STOPPED_RUNTIME_ERROR));
    for (;;)
        ;
}

void Fault_Handler(void)
{
    fw_puts("firmware: fault\n");
    fw_exit(1);
}

void Reset_Handler(void)
{
    /* CPACR: full access to coprocessors 10 and 11, the FPU, before any
     * floating-point instruction runs (the hard-float ABI uses it for
     * every float argument). */
    *(volatile uint32_t *)0xE000ED88u |= 0xFu << 20;
    __asm__ volatile("dsb\n\tisb" ::: "memory");
    memcpy(__data_start, __data_load,
           (size_t)((char *)__data_end - (char *)__data_start));
    memset(__bss_start, 0, (size_t)((char *)__bss_end - (char *)__bss_start));
    fw_exit(main());
}

/* The initial stack pointer, then the reset and fault handlers. */
__attribute__((section(".vectors"), used))
const uintptr_t fw_vectors[16] = {
    (uintptr_t)__stack_top,   (uintptr_t)Reset_Handler,
    (uintptr_t)Fault_Handler, (uintptr_t)Fault_Handler, /* NMI, HardFault */
    (uintptr_t)Fault_Handler, (uintptr_t)Fault_Handler, /* MemManage, Bus */
    (uintptr_t)Fault_Handler,                           /* UsageFault */
};
