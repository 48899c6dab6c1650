#!/bin/bash
# Host set-up for kchaos on Debian 12: Docker Engine (Debian's docker.io), mmdebstrap, Maven, Java,
# python3-venv, gcc + libfuse3-dev + fuse3 for lazyfs (built here, run in the nodes), chromium (the
# browser tests open the HTML reports in it), acl, sudo (a test sets the host up as a user), and
# openssh-server (the SSH transport's tests run their own sshd on 127.0.0.1; the host's ssh.service is kept
# off); then makes sure dockerd answers. As root, or as
# a user with passwordless sudo (the host part runs through sudo; the user is given the Docker Engine).
# Idempotent; quiet when everything is already there.
set -euo pipefail
for_user=""
[ "${1:-}" = --for ] && for_user=${2:-}
say() { echo "kchaos setup: $*" >&2; }

if [ "$(id -u)" != 0 ]; then
  # Not root: the host part runs as root through sudo, as CI machines allow; then this user gets the Docker Engine.
  if ! command -v sudo >/dev/null 2>&1 || ! sudo -n true 2>/dev/null; then
    say "needs root or passwordless sudo (apt-get, dockerd, mmdebstrap). Run as root, with sudo, or install"
    say "docker.io mmdebstrap maven openjdk-17-jdk-headless python3-venv gcc pkg-config libfuse3-dev fuse3 acl"
    say "yourself, start Docker, let this user reach it, then run 'make install'."
    exit 4
  fi
  sudo -n bash "$0" --for "$(id -un)"
  docker info >/dev/null 2>&1 || { say "$(id -un) cannot reach the Docker Engine; see the lines above"; exit 4; }
  exit 0
fi
if ! grep -qs '^ID=debian' /etc/os-release; then
  say "this script knows Debian only. Elsewhere: install Docker Engine, mmdebstrap, Maven, Java 17 and"
  say "python3 venv support, start Docker, then run 'make install'."
  exit 4
fi

need=()
for pair in docker:docker.io dockerd:docker.io mmdebstrap:mmdebstrap mvn:maven java:openjdk-17-jdk-headless \
            iptables:iptables fusermount3:fuse3 pkg-config:pkg-config gcc:gcc chromium:chromium setfacl:acl \
            sudo:sudo; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || need+=("${pair#*:}")
done
python3 -c 'import ensurepip, venv' 2>/dev/null || need+=(python3-venv)
dpkg -s libfuse3-dev >/dev/null 2>&1 || need+=(libfuse3-dev)
sshd_new=""
[ -x /usr/sbin/sshd ] || sshd_new=1
if [ ${#need[@]} -gt 0 ] || [ -n "$sshd_new" ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
fi
if [ ${#need[@]} -gt 0 ]; then
  say "installing ${need[*]}"
  apt-get install -y -qq --no-install-recommends $(printf '%s\n' "${need[@]}" | sort -u) >/dev/null
fi

# openssh-server must not start an sshd on this host's interfaces: not now (a policy-rc.d that exits 101
# keeps its postinst from starting ssh.service; any policy-rc.d already there is put back afterwards) and
# not at boot (/etc/ssh/sshd_not_to_be_run is Debian's switch, honoured by ssh.service and /etc/init.d/ssh).
if [ -n "$sshd_new" ]; then
  say "installing openssh-server with ssh.service off (delete /etc/ssh/sshd_not_to_be_run to let it run)"
  saved_policy=""
  if [ -e /usr/sbin/policy-rc.d ]; then
    saved_policy=$(mktemp)
    cp -p /usr/sbin/policy-rc.d "$saved_policy"
  fi
  restore_policy() {
    if [ -n "$saved_policy" ]; then mv -f "$saved_policy" /usr/sbin/policy-rc.d; else rm -f /usr/sbin/policy-rc.d; fi
  }
  trap restore_policy EXIT
  printf '#!/bin/sh\n# kchaos setup: no service starts while openssh-server installs\nexit 101\n' >/usr/sbin/policy-rc.d
  chmod 755 /usr/sbin/policy-rc.d
  mkdir -p /etc/ssh
  touch /etc/ssh/sshd_not_to_be_run
  apt-get install -y -qq --no-install-recommends openssh-server >/dev/null
  restore_policy
  trap - EXIT
fi

if ! docker info >/dev/null 2>&1; then
  if [ -d /run/systemd/system ]; then
    say "starting docker.service"
    systemctl start docker
  else
    say "starting dockerd (log: /var/log/kchaos-dockerd.log)"
    # A machine whose /run survived a session keeps dockerd's and containerd's pid files; when that pid now
    # belongs to another process, dockerd waits for a containerd that is not there and never answers.
    if ! pgrep -x dockerd >/dev/null && ! pgrep -x containerd >/dev/null; then
      rm -f /var/run/docker.pid /var/run/docker/containerd/containerd.pid
    fi
    nohup dockerd >/var/log/kchaos-dockerd.log 2>&1 &
  fi
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
  docker info >/dev/null 2>&1 || { say "dockerd did not come up; see /var/log/kchaos-dockerd.log"; exit 4; }
fi
say "Docker Engine $(docker version --format '{{.Server.Version}}') is answering"

# Run through sudo for a user (--for USER): that user joins the docker group, for later logins, and may use
# the Engine's socket now, which a group joined in this login would not give it. Reaching the socket is as
# much as root; the user has passwordless sudo already.
if [ -n "$for_user" ] && [ "$for_user" != root ]; then
  getent group docker >/dev/null || groupadd --system docker
  id -nG "$for_user" | tr ' ' '\n' | grep -qx docker || usermod -aG docker "$for_user"
  socket=/var/run/docker.sock
  if [ -S "$socket" ] && ! getfacl -p "$socket" 2>/dev/null | grep -q "^user:$for_user:rw"; then
    setfacl -m "u:$for_user:rw" "$socket"
  fi
  say "$for_user may use the Docker Engine (docker group; this login: an ACL on $socket)"
fi
