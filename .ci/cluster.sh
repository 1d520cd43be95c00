#!/usr/bin/env bash
# A real single-node SLURM cluster (slurmctld + slurmd + slurmdbd/MariaDB for sacct)
# from Debian packages, for CI and for local testing of the slurm executor.
#
#   bash .ci/cluster.sh start    install if missing, write configs, start daemons, wait until ready
#   bash .ci/cluster.sh stop     stop the daemons this script started
#   bash .ci/cluster.sh status   print sinfo
#
#   bash .ci/cluster.sh start-multi | stop-multi | status-multi
#                                the multi-node cluster (see `multi_*` below): 4 slurmd "nodes",
#                                each in its own network + UTS namespace, beside the single node
#   bash .ci/cluster.sh kill-node N | start-node N | stop-daemon D | start-daemon D
#                                faults of the multi-node cluster (D: slurmctld or slurmdbd),
#                                used by tests/support/cluster_faults.py and bench/drill.py
#
# Everything lives under $VERIBATCH_SLURM_DIR (default /tmp/veribatch-slurm); clients find the
# cluster through $VERIBATCH_SLURM_DIR/slurm.env (exports SLURM_CONF), which tests source.
# `start` is idempotent: a cluster that already answers is reused.  Must run as root
# (SlurmUser=root, as in a CI container).  Readiness is polled, never slept for blindly.
set -euo pipefail

STATE="${VERIBATCH_SLURM_DIR:-/tmp/veribatch-slurm}"
CONF="$STATE/etc/slurm.conf"
ENVFILE="$STATE/slurm.env"
DBPORT="${VERIBATCH_SLURM_DBPORT:-33061}"
CLUSTER=veribatch
HOST="$(hostname -s)"

log() { echo "[cluster] $*" >&2; }

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
  local limit=$1 what=$2; shift 2
  local end=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= end)); then
      log "timed out after ${limit}s waiting for $what"
      for f in "$STATE"/log/*.log; do [[ -f $f ]] && { echo "--- $f"; tail -n 20 "$f"; } >&2; done
      return 1
    fi
    sleep 0.2
  done
}

install_packages() {
  local missing=()
  command -v slurmctld >/dev/null || missing+=(slurm-wlm)
  command -v munged >/dev/null || missing+=(munge)
  command -v slurmdbd >/dev/null || missing+=(slurmdbd)
  command -v mariadbd >/dev/null || missing+=(mariadb-server)
  command -v ip >/dev/null || missing+=(iproute2)  # the multi-node cluster's namespaces
  if ((${#missing[@]})); then
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" slurm-wlm-mysql-plugin >/dev/null
  fi
}

write_configs() {
  mkdir -p "$STATE"/{etc,log,run,spool/ctld,spool/d,mysql}
  local cpus mem
  cpus=$(nproc)
  mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 * 8 / 10 ))
  cat >"$CONF" <<CONF
ClusterName=$CLUSTER
SlurmctldHost=localhost
SlurmUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MinJobAge=3600
KillWait=5
MaxArraySize=1001
SchedulerParameters=sched_min_interval=0
StateSaveLocation=$STATE/spool/ctld
SlurmdSpoolDir=$STATE/spool/d
SlurmctldPidFile=$STATE/run/slurmctld.pid
SlurmdPidFile=$STATE/run/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
JobAcctGatherType=jobacct_gather/none
NodeName=localhost NodeHostname=$HOST NodeAddr=127.0.0.1 CPUs=$cpus Boards=1 SocketsPerBoard=1 CoresPerSocket=$cpus ThreadsPerCore=1 RealMemory=$mem State=UNKNOWN
PartitionName=cpu Nodes=localhost Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=localhost MaxTime=INFINITE State=UP
CONF
  cat >"$STATE/etc/slurmdbd.conf" <<CONF
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
LogFile=$STATE/log/slurmdbd.log
PidFile=$STATE/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DBPORT
StorageUser=slurm
StoragePass=veribatch
StorageLoc=slurm_acct_db
CONF
  chmod 600 "$STATE/etc/slurmdbd.conf"
  echo "export SLURM_CONF=$CONF" >"$ENVFILE"
}

start_munge() {
  if pgrep -x munged >/dev/null && munge -n </dev/null | unmunge >/dev/null 2>&1; then return; fi
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge
  [[ -f /etc/munge/munge.key ]] || { mungekey --create 2>/dev/null || dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 2>/dev/null; chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key; }
  setsid runuser -u munge -- munged -F >"$STATE/log/munged.log" 2>&1 < /dev/null &
  wait_for 20 munged bash -c 'munge -n </dev/null | unmunge'
}

start_mariadb() { start_mariadb_named slurm_acct_db; }

start_mariadb_named() {  # start_mariadb_named DB: this $STATE's MariaDB on $DBPORT, with DB and user slurm
  if [[ ! -d "$STATE/mysql/mysql" ]]; then
    mariadb-install-db --user=root --datadir="$STATE/mysql" --auth-root-authentication-method=normal >"$STATE/log/mariadb-install.log" 2>&1
  fi
  if ! mariadb-admin --socket="$STATE/run/mysql.sock" ping >/dev/null 2>&1; then
    setsid mariadbd --user=root --datadir="$STATE/mysql" --socket="$STATE/run/mysql.sock" \
      --port="$DBPORT" --bind-address=127.0.0.1 --pid-file="$STATE/run/mariadb.pid" \
      --log-error="$STATE/log/mariadb.log" --skip-log-bin >/dev/null 2>&1 </dev/null &
    wait_for 60 mariadb mariadb-admin --socket="$STATE/run/mysql.sock" ping
  fi
  mariadb --socket="$STATE/run/mysql.sock" -u root <<SQL
CREATE DATABASE IF NOT EXISTS $1;
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'veribatch';
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'veribatch';
GRANT ALL ON $1.* TO 'slurm'@'localhost';
GRANT ALL ON $1.* TO 'slurm'@'127.0.0.1';
SQL
}

daemon_running() { [[ -f "$STATE/run/$1.pid" ]] && kill -0 "$(cat "$STATE/run/$1.pid")" 2>/dev/null; }

start() {
  export SLURM_CONF="$CONF"
  if [[ -f "$CONF" ]] && timeout 5 sinfo -h >/dev/null 2>&1 && timeout 5 sacctmgr -n list cluster >/dev/null 2>&1; then
    log "cluster already up (SLURM_CONF=$CONF)"; return
  fi
  install_packages
  write_configs
  start_munge
  start_mariadb
  daemon_running slurmdbd || setsid slurmdbd -D >>"$STATE/log/slurmdbd.out" 2>&1 </dev/null &
  wait_for 60 slurmdbd sacctmgr -n list cluster
  sacctmgr -i add cluster "$CLUSTER" >/dev/null 2>&1 || true
  daemon_running slurmctld || setsid slurmctld -D -i >>"$STATE/log/slurmctld.out" 2>&1 </dev/null &
  wait_for 60 slurmctld scontrol ping
  daemon_running slurmd || setsid slurmd -D -N localhost >>"$STATE/log/slurmd.out" 2>&1 </dev/null &
  wait_for 60 "node idle" bash -c 'sinfo -h -N -o %t | grep -Eq "^(idle|mix|alloc)"'
  wait_for 60 "cluster registered in slurmdbd" bash -c "sacctmgr -n -P list cluster format=cluster,controlhost | grep -q '^$CLUSTER|.'"
  log "cluster up: SLURM_CONF=$CONF (source $ENVFILE)"
  sinfo >&2
}

stop() {
  local name pid
  for name in slurmd slurmctld slurmdbd mariadb; do
    if [[ -f "$STATE/run/$name.pid" ]]; then
      pid=$(cat "$STATE/run/$name.pid")
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      rm -f "$STATE/run/$name.pid"
    fi
  done
  log "cluster stopped (state kept in $STATE)"
}

# ---------------------------------------------------------------------------------------
# The multi-node cluster: a SECOND cluster ($VERIBATCH_SLURM_MULTI_DIR, default
# /tmp/veribatch-slurm-multi; ClusterName veribatch-multi; its own slurmctld/slurmd/slurmdbd
# ports and MariaDB instance; munge is shared) whose nodes are network + UTS namespaces
# (an `ip netns` each, a veth pair to a bridge in the root namespace):
#
#   root namespace   bridge vbm-br 10.77.0.1/24: slurmctld, slurmdbd, MariaDB, clients
#   vbm-cpu1 .11  vbm-cpu2 .12   partition cpu (Default)
#   vbm-gpu1 .21  vbm-gpu2 .22   partition gpu, Gres=gpu:2 each (a count, no device files)
#
# Each node is `ip netns exec vbm-X unshare --uts` + its own hostname + one slurmd -N vbm-X
# on its own address, so a job on vbm-gpu2 sees hostname vbm-gpu2, its own IP, its own
# loopback, and (a private mount namespace) an /etc/hosts naming every node (Ray resolves
# the head's hostname).  The file system is the real one,
# shared as on a cluster.  What it does not emulate: separate CPUs/memory/disks (every node
# is the same 2 cores), real GPUs (CUDA_VISIBLE_DEVICES is empty), network latency/loss.
MSTATE="${VERIBATCH_SLURM_MULTI_DIR:-/tmp/veribatch-slurm-multi}"
MCONF="$MSTATE/etc/slurm.conf"
MCLUSTER=veribatch-multi
MNET=10.77.0
MDBPORT="${VERIBATCH_SLURM_MULTI_DBPORT:-33062}"
MCTLD_PORT=6917  # the single-node cluster uses Slurm's defaults 6817/6818/6819
MSLURMD_PORT=6918
MDBD_PORT=6919
# name:address-suffix:partition
MNODES=(cpu1:11:cpu cpu2:12:cpu gpu1:21:gpu gpu2:22:gpu)
MGPUS=2  # GRES gpu count per gpu node

mlog() { echo "[cluster-multi] $*" >&2; }

multi_write_configs() {
  mkdir -p "$MSTATE"/{etc,log,run,spool/ctld,mysql}
  local n name suffix part hosts="127.0.0.1 localhost" cpunodes=() gpunodes=() nodelines=""
  local cpus mem
  cpus=$(nproc)
  # the nodes share this machine's CPUs and memory; each declares what the single node does
  # (no cgroups enforce it), so that a stage asking for 8 GB fits on any node
  mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 * 8 / 10 ))
  for n in "${MNODES[@]}"; do
    IFS=: read -r name suffix part <<<"$n"
    hosts+=$'\n'"$MNET.$suffix vbm-$name"
    if [[ $part == gpu ]]; then
      gpunodes+=("vbm-$name")
      nodelines+="NodeName=vbm-$name NodeHostname=vbm-$name NodeAddr=$MNET.$suffix CPUs=$cpus Boards=1 SocketsPerBoard=1 CoresPerSocket=$cpus ThreadsPerCore=1 RealMemory=$mem Gres=gpu:$MGPUS State=UNKNOWN"$'\n'
    else
      cpunodes+=("vbm-$name")
      nodelines+="NodeName=vbm-$name NodeHostname=vbm-$name NodeAddr=$MNET.$suffix CPUs=$cpus Boards=1 SocketsPerBoard=1 CoresPerSocket=$cpus ThreadsPerCore=1 RealMemory=$mem State=UNKNOWN"$'\n'
    fi
  done
  hosts+=$'\n'"$MNET.1 vbm-ctld"
  local IFS=,
  cat >"$MCONF" <<CONF
ClusterName=$MCLUSTER
SlurmctldHost=localhost($MNET.1)
SlurmctldPort=$MCTLD_PORT
SlurmdPort=$MSLURMD_PORT
SlurmUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
GresTypes=gpu
ReturnToService=2
MinJobAge=3600
KillWait=5
SlurmdTimeout=30
MaxArraySize=1001
SchedulerParameters=sched_min_interval=0
StateSaveLocation=$MSTATE/spool/ctld
SlurmdSpoolDir=$MSTATE/spool/%n
SlurmctldPidFile=$MSTATE/run/slurmctld.pid
SlurmdPidFile=$MSTATE/run/slurmd-%n.pid
SlurmctldLogFile=$MSTATE/log/slurmctld.log
SlurmdLogFile=$MSTATE/log/slurmd-%n.log
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$MDBD_PORT
AccountingStorageTRES=gres/gpu
JobAcctGatherType=jobacct_gather/none
${nodelines}PartitionName=cpu Nodes=${cpunodes[*]} Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=${gpunodes[*]} MaxTime=INFINITE State=UP
CONF
  # Slurm 22.05 drops a gpu line that has a Count but no File, and wants character devices:
  # null-device clones stand in for /dev/nvidiaN (scheduling and CUDA_VISIBLE_DEVICES only).
  mkdir -p "$MSTATE/dev"
  local i
  for ((i = 0; i < MGPUS; i++)); do
    [[ -c "$MSTATE/dev/gpu$i" ]] || mknod "$MSTATE/dev/gpu$i" c 1 3
  done
  cat >"$MSTATE/etc/gres.conf" <<CONF
AutoDetect=off
NodeName=${gpunodes[*]} Name=gpu File=$MSTATE/dev/gpu[0-$((MGPUS - 1))]
CONF
  unset IFS
  cat >"$MSTATE/etc/slurmdbd.conf" <<CONF
AuthType=auth/munge
DbdHost=localhost
DbdPort=$MDBD_PORT
SlurmUser=root
LogFile=$MSTATE/log/slurmdbd.log
PidFile=$MSTATE/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$MDBPORT
StorageUser=slurm
StoragePass=veribatch
StorageLoc=slurm_acct_db_multi
CONF
  chmod 600 "$MSTATE/etc/slurmdbd.conf"
  printf '%s\n' "$hosts" >"$MSTATE/etc/hosts"
  echo "export SLURM_CONF=$MCONF" >"$MSTATE/slurm.env"
}

# Idempotent from any half state a killed run leaves (a bridge that kept its address, a
# namespace whose veth is gone or was never made): `addr replace` sets an address that may
# already be there (`addr add` fails with "Address already assigned"), and the namespace's
# own end is re-made whenever the host end is missing.
multi_network() {  # the bridge, one namespace + veth pair per node
  ip link show vbm-br >/dev/null 2>&1 || ip link add vbm-br type bridge
  ip addr replace "$MNET.1/24" dev vbm-br
  ip link set vbm-br up
  local n name suffix part ns
  for n in "${MNODES[@]}"; do
    IFS=: read -r name suffix part <<<"$n"
    ns="vbm-$name"
    [[ -e "/run/netns/$ns" ]] || ip netns add "$ns"
    if ! ip link show "vbm-$name-h" >/dev/null 2>&1; then
      ip -n "$ns" link del eth0 >/dev/null 2>&1 || true
      ip link add "vbm-$name-h" type veth peer name eth0 netns "$ns"
    fi
    ip link set "vbm-$name-h" master vbm-br up
    ip -n "$ns" addr replace "$MNET.$suffix/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
  done
}

mdaemon_running() { [[ -f "$MSTATE/run/$1.pid" ]] && kill -0 "$(cat "$MSTATE/run/$1.pid")" 2>/dev/null; }

multi_start() {
  export SLURM_CONF="$MCONF"
  if [[ -f "$MCONF" ]] && timeout 5 sinfo -h >/dev/null 2>&1 && timeout 5 sacctmgr -n list cluster >/dev/null 2>&1 \
     && [[ $(sinfo -h -N -o '%N %t' | grep -Ec ' (idle|mix|alloc)') -ge ${#MNODES[@]} ]]; then
    mlog "cluster already up (SLURM_CONF=$MCONF)"; return
  fi
  install_packages
  mkdir -p "$MSTATE"/log
  STATE="$MSTATE" start_munge
  multi_write_configs
  multi_network
  STATE="$MSTATE" DBPORT="$MDBPORT" start_mariadb_named slurm_acct_db_multi
  # `if`, not `a || b &`: a backgrounded list is a subshell that would keep our stdout open
  if ! mdaemon_running slurmdbd; then setsid slurmdbd -D >>"$MSTATE/log/slurmdbd.out" 2>&1 </dev/null & fi
  STATE="$MSTATE" wait_for 60 slurmdbd sacctmgr -n list cluster
  sacctmgr -i add cluster "$MCLUSTER" >/dev/null 2>&1 || true
  if ! mdaemon_running slurmctld; then setsid slurmctld -D -i >>"$MSTATE/log/slurmctld.out" 2>&1 </dev/null & fi
  STATE="$MSTATE" wait_for 60 slurmctld scontrol ping
  local n name suffix part
  for n in "${MNODES[@]}"; do
    IFS=: read -r name suffix part <<<"$n"
    multi_start_node "vbm-$name"
  done
  # A node left drained or down by an earlier session (a fault test) is a start's business:
  # once every slurmd answers, put such nodes back in service.
  STATE="$MSTATE" wait_for 60 "every slurmd to register" bash -c \
    "! sinfo -h -N -o '%t' | grep -q '\\*'"
  local stuck
  stuck=$(sinfo -h -N -o '%N %t' | awk '$2 ~ /^(drain|drng|down|inval|fail)/ {print $1}' | sort -u | paste -sd,)
  [[ -z $stuck ]] || scontrol update NodeName="$stuck" State=RESUME
  STATE="$MSTATE" wait_for 90 "every node idle" bash -c \
    "[[ \$(sinfo -h -N -o '%N %t' | sort -u | grep -Ec ' (idle|mix|alloc)') -ge ${#MNODES[@]} ]]"
  STATE="$MSTATE" wait_for 60 "cluster registered in slurmdbd" bash -c \
    "sacctmgr -n -P list cluster format=cluster,controlhost | grep -q '^$MCLUSTER|.'"
  mlog "cluster up: SLURM_CONF=$MCONF (source $MSTATE/slurm.env)"
  sinfo -N -o '%N %P %t %G %c %m' >&2
}

multi_start_node() {  # multi_start_node NAME: its slurmd, in its namespace, under its hostname
  local ns=$1
  mdaemon_running "slurmd-$ns" && return
  mkdir -p "$MSTATE/spool/$ns"
  # nsenter --net, not `ip netns exec`: the latter remounts /sys, hiding the cgroup file
  # system slurmd initialises.  A private mount namespace carries the nodes' /etc/hosts.
  SLURM_CONF="$MCONF" setsid nsenter --net="/run/netns/$ns" unshare --uts --mount --propagation private -- \
    sh -c "mount --bind $MSTATE/etc/hosts /etc/hosts && hostname $ns && exec slurmd -D -N $ns" \
    >>"$MSTATE/log/slurmd-$ns.out" 2>&1 </dev/null &
}

multi_kill_node() {  # multi_kill_node NAME: SIGKILL everything in the node's namespace (a lost node)
  local ns=$1 pids
  pids=$(ip netns pids "$ns" 2>/dev/null || true)
  [[ -n $pids ]] && kill -9 $pids 2>/dev/null || true
  rm -f "$MSTATE/run/slurmd-$ns.pid"
}

# Faults of the cluster itself (bench/drill.py, tests/support/cluster_faults.py): a daemon
# stopped as an admin or a crash would, and started again on the state it saved.
multi_stop_daemon() {  # multi_stop_daemon slurmctld|slurmdbd
  local name=$1 pid
  [[ $name == slurmctld || $name == slurmdbd ]] || { mlog "no such daemon: $name"; return 2; }
  [[ -f "$MSTATE/run/$name.pid" ]] || return 0
  pid=$(cat "$MSTATE/run/$name.pid")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  rm -f "$MSTATE/run/$name.pid"
}

multi_start_daemon() {  # multi_start_daemon slurmctld|slurmdbd: on its saved state, until it answers
  local name=$1
  export SLURM_CONF="$MCONF"
  case $name in
    slurmdbd)
      if ! mdaemon_running slurmdbd; then setsid slurmdbd -D >>"$MSTATE/log/slurmdbd.out" 2>&1 </dev/null & fi
      STATE="$MSTATE" wait_for 60 slurmdbd sacctmgr -n list cluster ;;
    slurmctld)
      if ! mdaemon_running slurmctld; then setsid slurmctld -D >>"$MSTATE/log/slurmctld.out" 2>&1 </dev/null & fi
      STATE="$MSTATE" wait_for 60 slurmctld scontrol ping ;;
    *) mlog "no such daemon: $name"; return 2 ;;
  esac
}

multi_stop() {
  local n name suffix part pid
  for n in "${MNODES[@]}"; do
    IFS=: read -r name suffix part <<<"$n"
    multi_kill_node "vbm-$name"
  done
  for name in slurmctld slurmdbd mariadb; do
    if [[ -f "$MSTATE/run/$name.pid" ]]; then
      pid=$(cat "$MSTATE/run/$name.pid")
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      rm -f "$MSTATE/run/$name.pid"
    fi
  done
  for n in "${MNODES[@]}"; do
    IFS=: read -r name suffix part <<<"$n"
    ip link del "vbm-$name-h" 2>/dev/null || true
    ip netns del "vbm-$name" 2>/dev/null || true
  done
  ip link del vbm-br 2>/dev/null || true
  mlog "cluster stopped (state kept in $MSTATE)"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) SLURM_CONF="$CONF" sinfo ;;
  start-multi) multi_start ;;
  stop-multi) multi_stop ;;
  status-multi) SLURM_CONF="$MCONF" sinfo -N -o '%N %P %t %G %E' ;;
  kill-node) multi_kill_node "${2:?node name}" ;;
  start-node) SLURM_CONF="$MCONF" multi_start_node "${2:?node name}" ;;
  stop-daemon) multi_stop_daemon "${2:?slurmctld or slurmdbd}" ;;
  start-daemon) multi_start_daemon "${2:?slurmctld or slurmdbd}" ;;
  *) echo "usage: $0 start|stop|status|start-multi|stop-multi|status-multi|kill-node N|start-node N|stop-daemon D|start-daemon D" >&2; exit 2 ;;
esac
