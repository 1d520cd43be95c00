#!/usr/bin/env bash
# A real single-node SLURM cluster (slurmctld + slurmd + slurmdbd/MariaDB for sacct)
# from Debian packages, for CI and for local testing of the slurm executor.
#
#   bash .ci/cluster.sh start    install if missing, write configs, start daemons, wait until ready
#   bash .ci/cluster.sh stop     stop the daemons this script started
#   bash .ci/cluster.sh status   print sinfo
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

start_mariadb() {
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
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'veribatch';
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'veribatch';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
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

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) SLURM_CONF="$CONF" sinfo ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
