/* kernels_images_dump DIR: writes every image of the compiled images.c (kernels/images/images.h)
 * to DIR/<index>.<sm_NN.cubin|compute_NN.ptx>, and one line per image on stdout:
 * "<index> <arch> <is_ptx> <size> <path>". check_images.py reads them back with readelf, so the
 * test sees the bytes the library links, not the build folder's cubins.
 * kernels_images_dump --names: the entry points every cubin must hold, one a line, expanded from
 * kernels/names.h's SYMMPIN_KERNEL_ENTRIES, as kernels/launch.c's table of names is. */
#include <stdio.h>
#include <string.h>

#include "kernels/images/images.h"
#include "kernels/names.h"

#define STR_(x) #x
#define STR(x) STR_(x)
#define SYMMPIN_KERNEL_ENTRY(family, number, dtype, op)                                            \
  puts(STR(SYMMPIN_KERNEL_NAME(family, dtype, op)));

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--names") == 0) {
    SYMMPIN_KERNEL_ENTRIES
    return 0;
  }
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR | --names\n", argv[0]);
    return 2;
  }
  for (int i = 0; i < symmpin_kernel_image_count; i++) {
    const symmpin_kernel_image *im = &symmpin_kernel_images[i];
    char path[4096];
    snprintf(path, sizeof path, "%s/%d.%s_%d.%s", argv[1], i, im->is_ptx ? "compute" : "sm",
             im->arch, im->is_ptx ? "ptx" : "cubin");
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(im->data, 1, im->size, f) != im->size || fclose(f) != 0) {
      perror(path);
      return 1;
    }
    printf("%d %d %d %zu %s\n", i, im->arch, im->is_ptx, im->size, path);
  }
  return 0;
}
