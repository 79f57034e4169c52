/* dlsym entry of libvgpu (x86-64 SysV). It asks vgpu_dlsym_resolve for a hook; if there is none it
 * tail-jumps to glibc's dlsym with the original arguments and the caller's return address untouched, so
 * glibc resolves RTLD_NEXT relative to the caller (an extra C frame would make it relative to libvgpu). */
#if defined(__x86_64__)
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
#else
#error "vgpu_dlsym.S: only x86-64 is implemented"
#endif
  .section .note.GNU-stack,"",@progbits
