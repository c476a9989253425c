/* The kernels' device code embedded in the library: one CUDA 12 cubin per architecture of the
 * meson option gpu_archs and the PTX of gpu_ptx (generated at build time into images.c by
 * kernels/images/embed.py). Plain C. */
#ifndef SYMMPIN_KERNELS_IMAGES_H
#define SYMMPIN_KERNELS_IMAGES_H

#include <stddef.h>

typedef struct symmpin_kernel_image {
  int arch;   /* 90 for sm_90 or compute_90 */
  int is_ptx; /* 1: PTX text, NUL included in size; 0: cubin */
  const unsigned char *data;
  size_t size;
} symmpin_kernel_image;

extern const symmpin_kernel_image symmpin_kernel_images[];
extern const int symmpin_kernel_image_count;

#endif
