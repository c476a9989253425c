#!/usr/bin/env bash
# One rank of a job, as the GPU suite places it: sets the rank's environment from its number, then
# execs the command (so the rank keeps its pid). Used in front of every rank by both launchers:
#   APP_RANK_WRAPPER="scripts/rank-env.sh" build/tests/apps/symmpin-app ...      (tests/apps/spawn.h)
#   torchrun --nproc_per_node=2 --no-python scripts/rank-env.sh python3 tests/apps/ddp_train.py
# The rank is RANK (else LOCAL_RANK), the job's size WORLD_SIZE; both launchers set them.
#
#   RANK_ENV_NCCL_HOSTS=K  K hosts as NCCL sees them: rank R gets NCCL_HOSTID=<job>-host<R*K/N>,
#                          so with K = N ranks may share a GPU (NCCL refuses two ranks on one GPU
#                          only when it believes they are on one host; it then talks over its
#                          socket transport). 0 or unset: NCCL's own host id.
#   RANK_ENV_SHM_HOSTS=K   K hosts as symmpin sees them: rank R runs in a mount namespace of its
#                          own whose /dev/shm is RANK_ENV_SHM_ROOT/host<R*K/N> (ranks of one host
#                          share that folder, which must be on a tmpfs), as on K machines.
#                          Needs root (unshare -m, mount --bind). 0 or unset: the real /dev/shm.
#   RANK_ENV_JOB=NAME      the host ids' prefix (default: rankenv-<the parent's pid>)
# Hosts are blocks of consecutive ranks: with N=4 and K=2, ranks 0 and 1 on host0, 2 and 3 on host1.
set -eu
[ $# -ge 1 ] || { echo "usage: rank-env.sh COMMAND [ARG...]" >&2; exit 2; }
rank=${RANK:-${LOCAL_RANK:-}}
world=${WORLD_SIZE:-}
case "$rank$world" in '' | *[!0-9]*) echo "rank-env.sh: RANK/LOCAL_RANK and WORLD_SIZE must be set (got '$rank', '$world')" >&2; exit 2 ;; esac
host_of() { echo $(($1 * $2 / world)); } # host_of RANK HOSTS
nccl_hosts=${RANK_ENV_NCCL_HOSTS:-0}
shm_hosts=${RANK_ENV_SHM_HOSTS:-0}
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0} TORCH_SYMM_MEM_DISABLE_MULTICAST=${TORCH_SYMM_MEM_DISABLE_MULTICAST:-1}
export NVSHMEM_DISABLE_NVLS=${NVSHMEM_DISABLE_NVLS:-1}
if [ "$nccl_hosts" -gt 0 ]; then
  NCCL_HOSTID="${RANK_ENV_JOB:-rankenv-$PPID}-host$(host_of "$rank" "$nccl_hosts")"
  export NCCL_HOSTID
fi
if [ "$shm_hosts" -gt 0 ]; then
  dir=${RANK_ENV_SHM_ROOT:?RANK_ENV_SHM_HOSTS needs RANK_ENV_SHM_ROOT}/host$(host_of "$rank" "$shm_hosts")
  mkdir -p "$dir"
  # unshare without --fork and sh's exec keep the pid; the namespace's mounts are private
  # (unshare's default propagation), so nothing outside sees the bind mount. A preloaded library
  # is for the rank, not for unshare and mount: it is set again for the final exec only.
  export RANK_ENV_PRELOAD=${LD_PRELOAD:-}
  # shellcheck disable=SC2016 # expanded by that sh
  exec env -u LD_PRELOAD unshare -m sh -c \
    'mount --bind "$1" /dev/shm && shift && { [ -z "$RANK_ENV_PRELOAD" ] || export LD_PRELOAD="$RANK_ENV_PRELOAD"; } && exec "$@"' \
    rank-env "$dir" "$@"
fi
exec "$@"
