#!/usr/bin/env bash
# Issue 19: `tpbench __worker` is started by tpbench's launchers only. Run by hand, or with a
# launcher's variables missing, it exits 2 saying what is missing, for each launcher: fork
# (RANK, WORLD_SIZE, LOCAL_RANK, TPB_CONTROL_SOCKET), mpirun (OMPI_COMM_WORLD_*, or MPICH's
# PMI_*) and srun (SLURM_*), and a job's rank needs the controller's address and token.
source "$(dirname "$0")/common.bash" "$@"
clean=(env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u TPB_LAUNCHER -u TPB_GROUP_ID -u TPB_CONTROL_SOCKET
       -u TPB_CONTROL_ADDR -u TPB_CONTROL_TOKEN -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE
       -u OMPI_COMM_WORLD_LOCAL_RANK -u SLURM_PROCID -u SLURM_NTASKS -u SLURM_LOCALID -u PMI_RANK -u PMI_SIZE)
prefix="tpbench __worker: internal role of a rank process, started by \`tpbench run\` (its fork, mpirun or srun launcher), not by hand: "

# expect_worker WHY ENV...: the worker under ENV exits 2 with WHY.
expect_worker() {
  local why=$1; shift
  expect_rc 2 "${clean[@]}" "$@" "$TPBENCH" __worker
  grep -qxF "$prefix$why" "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "expected: $why"; }
}
expect_worker "the fork launcher's variables are missing: RANK, WORLD_SIZE, LOCAL_RANK"
# torchrun-style variables alone do not make a tpbench rank.
expect_worker "TPB_GROUP_ID is missing" RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1
expect_worker "TPB_CONTROL_SOCKET is missing" RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 TPB_GROUP_ID=g
expect_worker "TPB_LAUNCHER is 'torchrun', expected fork, mpirun or srun" TPB_LAUNCHER=torchrun
# mpirun's ranks read OMPI_COMM_WORLD_*, never the fork launcher's RANK.
expect_worker "the mpirun launcher's variables are missing: OMPI_COMM_WORLD_RANK or PMI_RANK, OMPI_COMM_WORLD_SIZE or PMI_SIZE, OMPI_COMM_WORLD_LOCAL_RANK or MPI_LOCALRANKID" \
  TPB_LAUNCHER=mpirun RANK=0 WORLD_SIZE=2 LOCAL_RANK=0
expect_worker "TPB_CONTROL_ADDR or TPB_CONTROL_TOKEN is missing" TPB_LAUNCHER=mpirun TPB_GROUP_ID=g \
  OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_RANK=1 TPB_CONTROL_ADDR=127.0.0.1:1
expect_worker "the srun launcher's variables are missing: SLURM_LOCALID" TPB_LAUNCHER=srun SLURM_PROCID=0 SLURM_NTASKS=2
expect_worker "SLURM_NTASKS is 'two', expected a non-negative integer" TPB_LAUNCHER=srun SLURM_PROCID=0 SLURM_NTASKS=two SLURM_LOCALID=0
echo ok
