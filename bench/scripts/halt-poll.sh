# Sourced by bench/run-redis, bench/run-http and bench/run-grpc: how long an idle vCPU polls before it halts, and HALT_POLL_NS to
# set it for one run (the value before is put back when the run ends).
#
# Why it is printed with every run: on a virtual machine whose cpuidle driver is haltpoll, an idle vCPU first polls
# for guest_halt_poll_ns (the kernel's default is 200,000) and then halts, and waking a halted vCPU costs an exit to
# the hypervisor and back. The machines of bench/README.md boot with haltpoll.guest_halt_poll_ns=0, so every
# thread woken on an idle vCPU pays it. A decision on Redis is a chain of such wakes (the caller hands over to the
# connection's event loop, Redis wakes, the loop wakes, the caller wakes), and so is a proxied request; the less CPU
# a library spends a decision, the more often its vCPUs are idle between the wakes, and the more it loses. The tenth
# session measured both settings: bench/README.md, "On Redis" and "Over HTTP".
#
#   HALT_POLL_NS=200000 bench/run-redis    # the kernel's default, for this run only (root, and a haltpoll guest)
halt_poll=/sys/module/haltpoll/parameters/guest_halt_poll_ns
halt_poll_before=

# Sets HALT_POLL_NS, if given; fails, saying why, where it cannot be set.
halt_poll_set() {
  [ -n "${HALT_POLL_NS:-}" ] || return 0
  if ! [[ "$HALT_POLL_NS" =~ ^[0-9]+$ ]]; then
    echo "HALT_POLL_NS=$HALT_POLL_NS: expected a whole number of nanoseconds" >&2
    exit 2
  fi
  if ! [ -w "$halt_poll" ]; then
    echo "HALT_POLL_NS=$HALT_POLL_NS: $halt_poll is not writable here (not a haltpoll guest, or not root)" >&2
    exit 2
  fi
  halt_poll_before=$(cat "$halt_poll")
  echo "$HALT_POLL_NS" > "$halt_poll"
}

# Puts back the value HALT_POLL_NS replaced.
halt_poll_restore() {
  if [ -n "$halt_poll_before" ]; then
    echo "$halt_poll_before" > "$halt_poll"
  fi
}

# One line for the run's header.
halt_poll_describe() {
  if [ -r "$halt_poll" ]; then
    echo "== idle vCPUs poll $(cat "$halt_poll") ns before they halt (haltpoll guest_halt_poll_ns; the kernel's default is 200000)"
  else
    echo "== no haltpoll cpuidle driver here (bare metal, or another idle driver)"
  fi
}
