/* Which GPUs the kernels run on, and where programmatic dependent launch is used
 * (kernels/select.h): the policy behind symmpin_kernel_device_check, on the CPU. */
#include <criterion/criterion.h>
#include <string.h>

#include "kernels/select.h"

Test(arch, carried_code_is_named) {
  /* meson passes the list: at least the default's sm_90, never the fallback. */
  const char *a = symmpin_kernel_archs();
  cr_assert(strstr(a, "sm_") || strstr(a, "compute_"), "%s", a);
  cr_assert(strcmp(a, "unknown") != 0);
}

Test(arch, gpus_with_code_are_accepted) {
  char why[300] = "x";
  /* sm_80 code on sm_86 and sm_89, sm_90 native, sm_110 JIT-compiled from compute_90 PTX; a GPU
   * whose compute capability could not be read, but for which the runtime has code. */
  int ok[] = {80, 86, 89, 90, 100, 103, 110, 120, 121, 0};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    cr_assert_eq(symmpin_kernel_arch_check(0, ok[i], true, NULL, why, sizeof why), SYMMPIN_OK,
                 "sm_%d with code", ok[i]);
    cr_assert_str_empty(why);
  }
}

Test(arch, older_gpus_are_refused_by_name) {
  char why[300];
  /* Even where the runtime found code (a build for sm_75): the kernels need sm_80. */
  cr_assert_eq(symmpin_kernel_arch_check(1, 75, true, NULL, why, sizeof why),
               SYMMPIN_ERR_UNSUPPORTED);
  cr_assert(strstr(why, "compute capability 8.0 (sm_80) or newer"), "%s", why);
  cr_assert(strstr(why, "device 1, sm_75"), "%s", why);
  cr_assert_eq(symmpin_kernel_arch_check(0, 70, false, "no kernel image", why, sizeof why),
               SYMMPIN_ERR_UNSUPPORTED);
}

Test(arch, gpus_without_code_are_refused_with_the_list) {
  char why[300];
  cr_assert_eq(symmpin_kernel_arch_check(3, 110, false, "no kernel image is available", why,
                                         sizeof why),
               SYMMPIN_ERR_UNSUPPORTED);
  cr_assert(strstr(why, "no code for this GPU (device 3, sm_110)"), "%s", why);
  cr_assert(strstr(why, symmpin_kernel_archs()), "%s", why);
  cr_assert(strstr(why, "gpu_archs"), "%s", why);
  cr_assert(strstr(why, "CUDA says: no kernel image is available"), "%s", why);
  /* Unknown compute capability: still a sentence. */
  cr_assert_eq(symmpin_kernel_arch_check(0, 0, false, NULL, why, sizeof why),
               SYMMPIN_ERR_UNSUPPORTED);
  cr_assert(strstr(why, "compute capability unknown"), "%s", why);
  /* why may be NULL. */
  cr_assert_eq(symmpin_kernel_arch_check(0, 90, false, NULL, NULL, 0), SYMMPIN_ERR_UNSUPPORTED);
}

Test(arch, pdl_only_where_gpu_and_code_have_it) {
  cr_assert(symmpin_kernel_pdl_usable(90, 90, 12030));
  cr_assert(symmpin_kernel_pdl_usable(100, 100, 13000));
  cr_assert(symmpin_kernel_pdl_usable(110, 90, 13000)); /* JIT from compute_90: griddepcontrol */
  cr_assert_not(symmpin_kernel_pdl_usable(80, 80, 13000));
  cr_assert_not(symmpin_kernel_pdl_usable(89, 80, 13000));
  cr_assert_not(symmpin_kernel_pdl_usable(90, 80, 13000)); /* sm_90 GPU running compute_80 code */
  cr_assert_not(symmpin_kernel_pdl_usable(90, 0, 13000));
}

Test(arch, pdl_only_on_drivers_from_cuda_12_3) {
  /* Programmatic edges in captured graphs came with CUDA 12.3. */
  cr_assert_eq(SYMMPIN_KERNEL_PDL_MIN_DRIVER, 12030);
  cr_assert_not(symmpin_kernel_pdl_usable(90, 90, 12000));
  cr_assert_not(symmpin_kernel_pdl_usable(90, 90, 12020));
  cr_assert_not(symmpin_kernel_pdl_usable(90, 90, -1), "a driver of unknown version");
  cr_assert(symmpin_kernel_pdl_usable(90, 90, 12030));
  cr_assert(symmpin_kernel_pdl_usable(90, 90, 12040));
}

/* The default build's images, in embed.py's order: cubins, then the PTX. */
static const int image_arch[] = {80, 90, 100, 120, 90};
static const int image_is_ptx[] = {0, 0, 0, 0, 1};

Test(arch, images_are_picked_as_the_runtime_picks_from_a_fat_binary) {
  struct {
    int cc, image;
  } cases[] = {{80, 0},  {86, 0},  {89, 0},  {90, 1},  {100, 2}, {103, 2},
               {110, 4}, {120, 3}, {121, 3}, {130, 4}, {75, -1}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    cr_assert_eq(symmpin_kernel_image_pick(image_arch, image_is_ptx, 5, cases[i].cc),
                 cases[i].image, "sm_%d", cases[i].cc);
}

Test(arch, the_ptx_instead_of_a_refused_cubin) {
  /* Never a cubin, whatever its architecture; the PTX only where it is not newer than the GPU. */
  cr_assert_eq(symmpin_kernel_image_pick_ptx(image_arch, image_is_ptx, 5, 90), 4);
  cr_assert_eq(symmpin_kernel_image_pick_ptx(image_arch, image_is_ptx, 5, 120), 4);
  cr_assert_eq(symmpin_kernel_image_pick_ptx(image_arch, image_is_ptx, 5, 86), -1);
  cr_assert_eq(symmpin_kernel_image_pick_ptx(image_arch, image_is_ptx, 4, 120), -1, "no PTX");
}
