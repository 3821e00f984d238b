#!/bin/bash
# Runs inside the VM (as root, under systemd as PID 1), from the payload that tst_vm_systemd
# gives it: installs the .deb beside it and checks the unit. Prints one line per check, in order:
#   ok NAME            or            not ok NAME: WHY
# and "done" at the end. tst_vm_systemd waits for each line with a deadline.
set -u
here=$(cd "$(dirname "$0")" && pwd)
api=http://127.0.0.1:8000
data=/var/lib/agentdeck
unit_cgroup=/sys/fs/cgroup/system.slice/agentdeck.service

# Each check runs in a subshell: fail ends it, saying why. What a later check needs of an earlier
# one is in $state.
state=/run/vmtest/state
mkdir -p "$state"
fail() {
    echo "$*" | tr '\n' ' ' >"$state/why"
    exit 1
}
check() {
    local name=$1
    shift
    rm -f "$state/why"
    if ("$@"); then
        echo "ok $name"
    else
        echo "not ok $name: $(cat "$state/why" 2>/dev/null || echo failed)"
    fi
}
# Waits until the command succeeds, at most $1 seconds (polling; the deadline is what counts).
wait_for() {
    local deadline=$((SECONDS + $1))
    shift
    until "$@"; do
        [ $SECONDS -lt $deadline ] || return 1
        sleep 0.2
    done
}
conf_set() {
    local key=$1 value=$2 conf=/etc/agentdeck/agentdeck.conf
    if grep -q "^$key=" "$conf"; then
        sed -i "s|^$key=.*|$key=$value|" "$conf"
    else
        echo "$key=$value" >>"$conf"
    fi
}
api_get() { curl -sf --max-time 10 "$api$1"; }
api_post() { curl -sf --max-time 10 -H 'Content-Type: application/json' -d "$2" "$api$1"; }
message() {
    jq -nc --arg text "$1" '{role: "user", content: [{type: "text", text: $text}], run: true}'
}
create_shell() {
    api_post /api/conversations "$(jq -nc --argjson m "$(message "$1")" \
        '{agent: {kind: "shell"}, initial_message: $m}')" | jq -r .id
}
status_is() { [ "$(api_get "/api/conversations/$1" | jq -r .execution_status)" = "$2" ]; }
host_pid() { cat "$data/runtimes/$1/sandbox.pid" 2>/dev/null; }
final_response() { api_get "/api/conversations/$1/agent_final_response" | jq -r .response; }
agentdeck_processes() { pgrep -a -f '^/usr/(bin|libexec/agentdeck)/agentdeck' || true; }

install_package() {
    local out
    out=$(dpkg -i "$here"/agentdeck_*.deb 2>&1) || fail "dpkg -i: $out"
}

# A listener on all interfaces without a session API key is warned of.
configure() {
    conf_set AGENTDECK_LISTEN 0.0.0.0:8000
    conf_set AGENTDECK_SHUTDOWN_GRACE 30s
    conf_set AGENTDECK_SANDBOX_MEMORY 64MiB
    conf_set AGENTDECK_SANDBOX_PROCESSES 64
    # 256 sandboxes of 64 processes do not fit the VM's kernel.threads-max.
    conf_set AGENTDECK_MAX_SANDBOXES 8
}

# Type=notify: `systemctl start` returns once READY=1 came, so the API answers at once.
start_is_ready() {
    local out
    out=$(systemctl start agentdeck 2>&1) || fail "systemctl start: $out $(journalctl -u agentdeck -n 20 --no-pager)"
    [ "$(systemctl show -p ActiveState --value agentdeck)" = active ] || fail "not active"
    out=$(curl -s --max-time 5 -w ' %{http_code}' "$api/ready") || fail "no answer right after start: $out"
    [ "${out##* }" = 200 ] || fail "/ready right after start: $out"
    [ "$(systemctl show -p NotifyAccess --value agentdeck)" != none ] || fail "NotifyAccess none"
}

journal_has_the_warning() {
    local out
    out=$(journalctl -p warning -u agentdeck -o cat --no-pager 2>&1)
    grep -q "no session API key" <<<"$out" || fail "journalctl -p warning -u agentdeck: $out"
    # Info lines are not warnings.
    ! grep -q "listening on" <<<"$out" || fail "an info line has a warning's priority: $out"
}

# With Delegate=yes the server moved itself to supervisor/ and gives its sandboxes cgroups.
delegated_cgroup() {
    local main
    main=$(systemctl show -p MainPID --value agentdeck)
    [ "$(systemctl show -p Delegate --value agentdeck)" = yes ] || fail "Delegate is not yes"
    grep -qx "0::/system.slice/agentdeck.service/supervisor" "/proc/$main/cgroup" ||
        fail "the server is in $(cat "/proc/$main/cgroup")"
    grep -qw memory "$unit_cgroup/cgroup.subtree_control" &&
        grep -qw pids "$unit_cgroup/cgroup.subtree_control" ||
        fail "subtree_control: $(cat "$unit_cgroup/cgroup.subtree_control")"
}

# A command that runs while the service restarts: the sandbox host is adopted, and the command's
# output, printed before and after the restart began, is all there.
survives_restart() {
    local id pid events
    id=$(create_shell 'echo before-restart; touch started; sleep 6; echo after-restart') &&
        [ -n "$id" ] && [ "$id" != null ] || fail "create failed"
    echo "$id" >"$state/restarted"
    wait_for 60 test -e "$data/workspaces/$id/started" || fail "the command did not start"
    pid=$(host_pid "$id")
    [ -n "$pid" ] || fail "no sandbox.pid"
    systemctl restart agentdeck || fail "systemctl restart: $(journalctl -u agentdeck -n 30 --no-pager)"
    kill -0 "$pid" 2>/dev/null || fail "the sandbox host $pid died with the restart"
    [ "$(host_pid "$id")" = "$pid" ] || fail "another sandbox host: $(host_pid "$id") not $pid"
    [ "$(api_get "/api/conversations/$id" | jq -r .runtime_info.runtime_status)" = available ] ||
        fail "runtime: $(api_get "/api/conversations/$id" | jq -c .runtime_info)"
    events=$(api_get "/api/conversations/$id/events/search?limit=100")
    grep -q before-restart <<<"$events" && grep -q after-restart <<<"$events" ||
        fail "the command's output is not all there: $events"
    # The adopted sandbox runs the next command.
    api_post "/api/conversations/$id/events" "$(message 'echo again-$((40 + 2))')" >/dev/null ||
        fail "message refused"
    wait_for 60 status_is "$id" finished || fail "not finished: $(api_get "/api/conversations/$id" | jq -c .execution_status)"
    [ "$(final_response "$id" | tr -d '[:space:]')" = again-42 ] || fail "answer: $(final_response "$id")"
    [ "$(host_pid "$id")" = "$pid" ] || fail "the next command had another sandbox host"
}

# The sandbox's cgroup holds its host and commands, with the policy's limits: 64 MiB per process
# and as much for /tmp and /dev/shm, 64 MiB for the host; 64 processes and 16 of the sandbox's.
sandbox_cgroup_limits() {
    local id cg pid
    id=$(cat "$state/restarted") || fail "no conversation of restart-adopts"
    cg=$unit_cgroup/sandbox-$id
    pid=$(host_pid "$id")
    [ -d "$cg" ] || fail "no $cg: $(ls "$unit_cgroup")"
    [ "$(cat "$cg/memory.max")" = $((192 << 20)) ] || fail "memory.max $(cat "$cg/memory.max")"
    [ "$(cat "$cg/pids.max")" = 80 ] || fail "pids.max $(cat "$cg/pids.max")"
    grep -qx "$pid" "$cg/cgroup.procs" || fail "the host $pid is not in $cg"
}

# Each process stays within its own 64 MiB, 7 of them at once not within the sandbox's 192 MiB:
# the kernel kills in the sandbox's cgroup, and nothing else.
memory_limit_enforced() {
    local id cg
    id=$(create_shell 'for i in 1 2 3 4 5 6 7; do (head -c 40M /dev/zero; sleep 8) | tail -c 40M >/dev/null & done; wait; echo hogs-done') &&
        [ -n "$id" ] && [ "$id" != null ] || fail "create failed"
    wait_for 120 status_is "$id" finished ||
        fail "not finished: $(api_get "/api/conversations/$id" | jq -c '[.execution_status, .outcome]') $(cat "$unit_cgroup/sandbox-$id/memory.events" 2>&1)"
    cg=$unit_cgroup/sandbox-$id
    grep -Eq '^oom_kill [1-9]' "$cg/memory.events" ||
        fail "no OOM kill in the sandbox's cgroup: $(cat "$cg/memory.events" 2>&1) $(final_response "$id")"
    [ "$(systemctl show -p ActiveState --value agentdeck)" = active ] || fail "the service went down"
    api_get /ready >/dev/null || fail "the server does not answer"
}

# Processes count in the sandbox's cgroup, threads and the host's own included, up to pids.max.
pids_counted() {
    local id cg
    id=$(create_shell 'for i in $(seq 30); do sleep 20 & done; touch forked; wait') &&
        [ -n "$id" ] && [ "$id" != null ] || fail "create failed"
    cg=$unit_cgroup/sandbox-$id
    wait_for 60 test -e "$data/workspaces/$id/forked" || fail "the command did not fork"
    [ "$(cat "$cg/pids.current")" -ge 31 ] || fail "pids.current $(cat "$cg/pids.current")"
    [ "$(cat "$cg/pids.max")" = 80 ] || fail "pids.max $(cat "$cg/pids.max")"
    api_post "/api/conversations/$id/interrupt" '{}' >/dev/null || true
}

# After a crash (SIGKILL) systemd starts the server again, which adopts the sandbox and gives its
# cgroup its limits again.
crash_restarts() {
    local id pid main cg
    id=$(cat "$state/restarted") || fail "no conversation of restart-adopts"
    pid=$(host_pid "$id")
    cg=$unit_cgroup/sandbox-$id
    main=$(systemctl show -p MainPID --value agentdeck)
    kill -9 "$main"
    new_server() {
        local now
        now=$(systemctl show -p MainPID --value agentdeck)
        [ "$now" != 0 ] && [ "$now" != "$main" ] && api_get /ready >/dev/null
    }
    wait_for 90 new_server ||
        fail "no server after the crash: $(journalctl -u agentdeck -n 15 --no-pager -o cat)"
    kill -0 "$pid" 2>/dev/null || fail "the sandbox host $pid died"
    grep -qx "$pid" "$cg/cgroup.procs" || fail "the host $pid is not in $cg"
    [ "$(cat "$cg/memory.max")" = $((192 << 20)) ] || fail "memory.max $(cat "$cg/memory.max")"
    [ "$(cat "$cg/pids.max")" = 80 ] || fail "pids.max $(cat "$cg/pids.max")"
}

# `systemctl stop`, then `apt-get purge`, and no agentdeck process is left.
stop_and_purge_leave_nothing() {
    local out
    systemctl stop agentdeck || fail "systemctl stop failed"
    out=$(apt-get purge -y agentdeck 2>&1) || fail "apt-get purge: $out"
    wait_for 30 test -z "$(agentdeck_processes)" || fail "still running: $(agentdeck_processes)"
}

check install install_package
configure
check start-is-ready start_is_ready
check journal-warning journal_has_the_warning
check delegated-cgroup delegated_cgroup
check restart-adopts survives_restart
check sandbox-cgroup sandbox_cgroup_limits
check memory-limit memory_limit_enforced
check pids-limit pids_counted
check crash-restart crash_restarts
check stop-purge stop_and_purge_leave_nothing
echo "--- journal of agentdeck"
journalctl -u agentdeck --no-pager -o short-precise | tail -n 60
echo done
