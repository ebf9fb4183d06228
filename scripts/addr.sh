# Sourced by run.sh and rehearse.sh: listen addresses (VG_*_ADDR) as clients reach them.

# client_addr: host:port as a client reaches a listen address (an empty, 0.0.0.0 or [::] host is
# this machine)
client_addr() {
  local host=${1%:*} port=${1##*:}
  case $host in "" | 0.0.0.0 | "[::]") host=127.0.0.1 ;; esac
  echo "$host:$port"
}

# dialable: client_addr as bash's /dev/tcp names it: host/port, an IPv6 host without brackets
dialable() {
  local addr host
  addr=$(client_addr "$1")
  host=${addr%:*}
  case $host in \[*\]) host=${host:1:-1} ;; esac
  echo "$host/${addr##*:}"
}

# answers: something accepts connections on the address (no HTTP client needed)
answers() {
  (exec 3<>"/dev/tcp/$(dialable "$1")") 2>/dev/null
}
