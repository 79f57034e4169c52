/* dlsym entry of libvgpu (x86-64 SysV). It asks vgpu_dlsym_resolve for a hook; if there is none it
 * tail-jumps to glibc's dlsym with the original arguments and the caller's return address untouched, so
 * glibc resolves RTLD_NEXT relative to the caller (an extra C frame would make it relative to libvgpu). */
#if defined(__x86_64__) && !defined(VGPU_NO_ASM)
  .text
  .globl dlsym
  .type dlsym, @function
dlsym:
  .cfi_startproc
  pushq %rdi
  .cfi_adjust_cfa_offset 8
  pushq %rsi
  .cfi_adjust_cfa_offset 8
  subq $8, %rsp
  .cfi_adjust_cfa_offset 8
  call vgpu_dlsym_resolve
  addq $8, %rsp
  .cfi_adjust_cfa_offset -8
  popq %rsi
  .cfi_adjust_cfa_offset -8
  popq %rdi
  .cfi_adjust_cfa_offset -8
  testq %rax, %rax
  jz 1f
  ret
1:
  movq vgpu_real_dlsym(%rip), %rax
  testq %rax, %rax
  jz 2f
  jmp *%rax
2:
  xorl %eax, %eax
  ret
  .cfi_endproc
  .size dlsym, .-dlsym
#endif /* other architectures: C versions in vgpu_interpose.c (RTLD_NEXT then resolves from libvgpu) */

/* Launch hooks with stack arguments (cuLaunchKernel, cuLaunchCooperativeKernel and their _ptsz variants):
 * registers rdi..r9 are saved, vgpu_launch_check(gridDimX * gridDimY * gridDimZ) runs the SM limiter gate
 * (and loads the driver on first use), then the hook tail-jumps to the driver with the caller's stack
 * arguments untouched. Without an SM limit the hook is four instructions. */
#if defined(__x86_64__) && !defined(VGPU_NO_ASM)
.macro VGPU_LAUNCH_HOOK name
  .text
  .globl \name
  .type \name, @function
\name:
  .cfi_startproc
  movq real_\name(%rip), %rax
  testq %rax, %rax
  jz 1f
  cmpl $0, vgpu_sm_active(%rip)
  jne 1f
  jmp *%rax
1:
  pushq %rdi
  .cfi_adjust_cfa_offset 8
  pushq %rsi
  .cfi_adjust_cfa_offset 8
  pushq %rdx
  .cfi_adjust_cfa_offset 8
  pushq %rcx
  .cfi_adjust_cfa_offset 8
  pushq %r8
  .cfi_adjust_cfa_offset 8
  pushq %r9
  .cfi_adjust_cfa_offset 8
  subq $8, %rsp
  .cfi_adjust_cfa_offset 8
  movl %esi, %edi
  movl %edx, %eax
  imulq %rax, %rdi
  movl %ecx, %eax
  imulq %rax, %rdi
  call vgpu_launch_check
  addq $8, %rsp
  .cfi_adjust_cfa_offset -8
  popq %r9
  .cfi_adjust_cfa_offset -8
  popq %r8
  .cfi_adjust_cfa_offset -8
  popq %rcx
  .cfi_adjust_cfa_offset -8
  popq %rdx
  .cfi_adjust_cfa_offset -8
  popq %rsi
  .cfi_adjust_cfa_offset -8
  popq %rdi
  .cfi_adjust_cfa_offset -8
  movq real_\name(%rip), %rax
  testq %rax, %rax
  jz 2f
  jmp *%rax
2:
  movl $3, %eax /* CUDA_ERROR_NOT_INITIALIZED: no driver */
  ret
  .cfi_endproc
  .size \name, .-\name
.endm

VGPU_LAUNCH_HOOK cuLaunchKernel
VGPU_LAUNCH_HOOK cuLaunchKernel_ptsz
VGPU_LAUNCH_HOOK cuLaunchCooperativeKernel
VGPU_LAUNCH_HOOK cuLaunchCooperativeKernel_ptsz
#endif

  .section .note.GNU-stack,"",@progbits
