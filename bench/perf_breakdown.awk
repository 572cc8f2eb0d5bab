# bench/perf_breakdown.awk — where the CPU of one pgbench run went, from
# `perf script -F comm,pid,ip,sym,dso --no-inline` of a DWARF call-graph
# profile of every process of the benchmark cluster (bench/run.sh,
# measurement 5). Usage: awk -f perf_breakdown.awk <lake.so symbols> -
# where the symbols file is `nm -n` of the loaded lake.so ("addr name" per
# line): frames perf could not name in lake.so (the file was replaced on
# disk while the server ran: "(deleted)") are named from it.
#
# A sample counts for a category when its stack contains a frame of that
# category (inclusive, "children" accounting); categories are checked in
# order and a sample counts for the FIRST that matches, so the top-level
# rows partition the samples. Output (tab-separated):
#   total	<samples>
#   cat	<name>	<samples>
#   admission	<part>	<samples>
#   down	<child of lake_append>	<child of that>	<samples>
#
# Note: release_permit() ends in a tail call to ConditionVariableBroadcast,
# so that frame is often the only trace of the release path on the stack;
# nothing else in the backends of this workload broadcasts a condition
# variable, so it is counted as admission.
BEGIN { RS = ""; FS = "\n" }
FILENAME == ARGV[1] {
    for (i = 1; i <= NF; i++) {
        if (split($i, a, " ") < 2) continue
        ns++; saddr[ns] = hex(a[1]); sname[ns] = a[2]
    }
    next
}
{
    total++
    nf = 0
    for (i = 2; i <= NF; i++) {
        n = split($i, a, " ")
        if (n < 2) continue
        nf++
        fr[nf] = a[2]
        dso[nf] = $i
        if (a[2] == "[unknown]" && $i ~ /lake\.so/) fr[nf] = lake_sym(hex(a[1]))
    }
    adm = 0; app = 0; sec = 0; com = 0; exe = 0; wait = 0; rel = 0; acq = 0; lk = 0
    for (i = 1; i <= nf; i++) {
        s = fr[i]
        if (dso[i] ~ /lake\.so/) lk = 1
        if (s ~ /^(admission_reserve|admission_xact_callback|admission_exit_callback|try_take|release_permit|wait_and_take|ConditionVariableBroadcast)$/) adm = 1
        if (s ~ /^(wait_and_take|ConditionVariableTimedSleep)$/) wait = 1
        if (s ~ /^(admission_xact_callback|admission_exit_callback|release_permit|ConditionVariableBroadcast)$/) rel = 1
        if (s ~ /^(admission_reserve|try_take)$/) acq = 1
        if (s == "lake_append") { app = 1; appi = i }
        if (s == "fmgr_security_definer") sec = 1
        if (s == "CommitTransactionCommand") com = 1
        if (s == "standard_ExecutorRun" || s == "PortalRun") exe = 1
    }
    if (adm) {
        c = "admission (acquire, wait, release)"
        if (wait) part = "waiting: sleep/wake-up on the condition variable"
        else if (rel) part = "release: subtract + broadcast to sleepers"
        else part = "acquire: CAS fast path (try_take)"
        A[part]++
    }
    else if (app) c = "lake.append body (excluding admission)"
    else if (lk) c = "other lake.so code (worker; stacks perf could not unwind)"
    else if (sec) c = "function-call overhead (SET search_path: fmgr_security_definer)"
    else if (com) c = "commit (WAL insert + flush, excluding admission release)"
    else if (exe) c = "statement execution (executor, outside lake.append)"
    else c = "other (client protocol, parse/bind, idle loop, WAL writer, ...)"
    C[c]++
    if (app) {
        l1 = (appi > 1) ? fr[appi - 1] : "(lake_append itself)"
        l2 = (appi > 2) ? fr[appi - 2] : "-"
        if (adm) { l1 = "admission"; l2 = "-" }
        D[l1 "\t" l2]++
    }
}
END {
    print "total\t" total
    for (k in C) print "cat\t" k "\t" C[k]
    for (k in A) print "admission\t" k "\t" A[k]
    for (k in D) print "down\t" k "\t" D[k]
}

function hex(h,    i, c, v) {
    v = 0
    h = tolower(h)
    sub(/^0x/, "", h)
    for (i = 1; i <= length(h); i++) {
        c = index("0123456789abcdef", substr(h, i, 1))
        if (c == 0) return -1
        v = v * 16 + c - 1
    }
    return v
}
# Greatest symbol at or below addr (symbols are sorted by address).
function lake_sym(addr,    lo, hi, mid) {
    if (ns == 0 || addr < saddr[1]) return "[unknown]"
    lo = 1; hi = ns
    while (lo < hi) {
        mid = int((lo + hi + 1) / 2)
        if (saddr[mid] <= addr) lo = mid; else hi = mid - 1
    }
    return sname[lo]
}
