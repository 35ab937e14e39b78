# The summary of scripts/bench, from two files: the table rows of every run
# (svc bench's columns; a mode runs once per run, opa-eval after each eval
# run) and each run's peak RSS ("mode 45.2MiB"). With part=table it prints,
# per mode and concurrency, the median of each figure over the runs with
# its range; with part=verdicts, the targets of docs/performance.md judged
# on those medians and svc's figures as ratios of the floor's. With an
# even number of runs the median is the mean of the middle two.

# ms converts a Go duration (950µs, 1.5ms, 2.1s) to milliseconds.
function ms(d) {
	if (d ~ /µs$/) return substr(d, 1, length(d) - 2) / 1000
	if (d ~ /ms$/) return substr(d, 1, length(d) - 2) + 0
	if (d ~ /s$/) return substr(d, 1, length(d) - 1) * 1000
	return "n/a"
}

# mib converts a size as svc bench prints it (45.2MiB) to MiB.
function mib(s) { return s ~ /MiB$/ ? substr(s, 1, length(s) - 3) + 0 : "n/a" }

# add records value v of figure f for key k, unless it is unknown.
function add(k, f, v) {
	if (v != "n/a") vals[k, f] = vals[k, f] " " v
}

# stats sets MED, LO and HI to the median, least and greatest value of
# figure f for key k, and returns how many there are.
function stats(k, f,    a, n, i, j, x) {
	n = split(vals[k, f], a, " ")
	for (i = 1; i <= n; i++) {
		x = a[i] + 0
		for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]
		a[j + 1] = x
	}
	if (n == 0) return 0
	MED = n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	LO = a[1]
	HI = a[n]
	return n
}

# show renders value x of figure f: latencies in ms to three significant
# digits or whole ms, RSS in MiB to 0.1, the rest whole.
function show(f, x) {
	if (f == "rss") return sprintf("%.1f", x)
	if (f !~ /^p/ || x >= 100) return sprintf("%.0f", x)
	return sprintf(x >= 10 ? "%.1f" : "%.2f", x)
}

# cell renders figure f for key k: the median, and its range when there
# is more than one run.
function cell(k, f,    n) {
	n = stats(k, f)
	if (n == 0) return "n/a"
	if (n == 1) return show(f, MED)
	return show(f, MED) " (" show(f, LO) "-" show(f, HI) ")"
}

# med is the median of figure f for key k ("" when unknown).
function med(k, f) { return stats(k, f) ? MED : "" }

# spread says what a figure of a verdict line is: "median of N runs" with
# its range, or "one run".
function spread(k, f, fmt, unit,    n) {
	n = stats(k, f)
	if (n <= 1) return "one run"
	return sprintf("median of %d runs, " fmt "-" fmt "%s", n, LO, HI, unit)
}

# medians says what a comparison of two figures is, from their runs a and b.
function medians(a, b) {
	if (a == 1 && b == 1) return "one run each"
	if (a == b) return "medians of " a " runs each"
	return "medians of " a " and " b " runs"
}

function verdict(ok) { return ok ? "met" : "NOT met" }

FNR == NR {
	k = $1 SUBSEP $2
	if (!(k in nruns)) keys[++nkeys] = k
	nruns[k]++
	add(k, "rps", $4)
	add(k, "p50", ms($5))
	add(k, "p90", ms($6))
	add(k, "p99", ms($7))
	add(k, "rss", mib($12))
	add(k, "svc", $13)
	add(k, "opa", $14)
	add(k, "gen", $15)
	if ($1 ~ /^server/ && !($1 in ran)) servers[++nservers] = $1
	ran[$1] = 1
	next
}
{
	if (!(($1, "peak") in vals)) peaked[++npeaked] = $1
	add($1, "peak", mib($2))
}

END {
	if (part == "table") table()
	else verdicts()
}

# table prints the figures of every mode and concurrency, columns padded
# to their widest cell.
function table(    head, ncol, r, c, k, row, w, line) {
	ncol = split("mode conc runs decided/s p50 p90 p99 svc-cpu opa-cpu gen-cpu max-RSS", head, " ")
	for (c = 1; c <= ncol; c++) T[0, c] = head[c]
	for (r = 1; r <= nkeys; r++) {
		k = keys[r]
		split(k, row, SUBSEP)
		T[r, 1] = row[1]; T[r, 2] = row[2]; T[r, 3] = nruns[k]
		T[r, 4] = cell(k, "rps")
		T[r, 5] = cell(k, "p50"); T[r, 6] = cell(k, "p90"); T[r, 7] = cell(k, "p99")
		T[r, 8] = cell(k, "svc"); T[r, 9] = cell(k, "opa"); T[r, 10] = cell(k, "gen")
		T[r, 11] = cell(k, "rss")
	}
	for (c = 1; c <= ncol; c++)
		for (r = 0; r <= nkeys; r++) if (length(T[r, c]) > w[c]) w[c] = length(T[r, c])
	if (runs > 1) printf "each figure the median of %d runs, (least-greatest) of the runs beside it:\n", runs
	for (r = 0; r <= nkeys; r++) {
		line = sprintf("%-" w[1] "s", T[r, 1])
		for (c = 2; c <= ncol; c++) line = line sprintf("  %" w[c] "s", T[r, c])
		print line
	}
	print "(decided/s: decisions per second; p50, p90, p99 in ms; svc-cpu, opa-cpu, gen-cpu: CPU per decision in µs;"
	print "max-RSS: the engine's largest VmRSS during the timed run, MiB; runs: the runs that printed this row)"
}

# verdicts judges the medians against the targets and the floor.
function verdicts(    i, m, f, bare, e1, e16, o16, label) {
	bare = med("opa-eval" SUBSEP 1, "p50")
	e1 = med("eval" SUBSEP 1, "p50")
	if (e1 != "" && bare > 0)
		printf "eval p50 at concurrency 1 / bare opa eval p50: %.2fx (target <= 1.05x): %s; %s\n",
			e1 / bare, verdict(e1 / bare <= 1.05), medians(nruns["eval", 1], nruns["opa-eval", 1])
	e16 = med("eval" SUBSEP 16, "rps")
	o16 = med("opa-eval" SUBSEP 16, "rps")
	if (e16 != "" && o16 != "")
		printf "eval throughput at concurrency 16: %d decisions/s, bare opa eval 16 in parallel: %d/s (%.2fx); %s\n",
			e16, o16, e16 / (o16 > 0 ? o16 : 1), medians(nruns["eval", 16], nruns["opa-eval", 16])
	for (i = 1; i <= nservers; i++) server_verdicts(servers[i])
	for (i = 1; i <= npeaked; i++) {
		m = peaked[i]
		if (med(m, "peak") == "") continue
		label = m ~ /^floor/ ? "scripts/floor peak RSS" : m == "pg-replicas" ? "svc serve peak RSS (the first replica)" : "svc serve peak RSS"
		printf "%s, %s mode: %.1fMiB%s; %s\n", label, m, med(m, "peak"),
			m ~ /^floor/ ? "" : " (target <= 80MiB after a 30-minute run: scripts/soak)", spread(m, "peak", "%.1f", "MiB")
	}
	for (i = 1; i <= nservers; i++) {
		m = servers[i]; f = m; sub(/^server/, "floor", f)
		if (f in ran) floor_ratios(m, f)
	}
}

# server_verdicts judges server mode m's medians against the targets.
function server_verdicts(m,    k1, k16, v, s, o) {
	k1 = m SUBSEP 1
	k16 = m SUBSEP 16
	if ((v = med(k1, "p50")) != "")
		printf "%s p50 at concurrency 1: %.3fms (target <= 1ms): %s; %s\n", m, v, verdict(v <= 1), spread(k1, "p50", "%.3f", "ms")
	if ((v = med(k1, "p99")) != "")
		printf "%s p99 at concurrency 1: %.3fms (target <= 3ms): %s; %s\n", m, v, verdict(v <= 3), spread(k1, "p99", "%.3f", "ms")
	if ((v = med(k16, "rps")) != "")
		printf "%s throughput at concurrency 16: %d decisions/s (target >= 4500): %s; %s\n",
			m, v, verdict(v >= 4500), spread(k16, "rps", "%d", "")
	s = med(k16, "svc")
	o = med(k16, "opa")
	if (s == "" || o == "") return
	printf "%s CPU per decision at concurrency 16: svc %dus (target <= 150us): %s, %s; opa %dus (target <= 150us): %s, %s; generator %dus\n",
		m, s, verdict(s <= 150), spread(k16, "svc", "%d", "us"), o, verdict(o <= 150), spread(k16, "opa", "%d", "us"), med(k16, "gen")
	printf "%s CPU per decision at concurrency 16, svc + opa: %dus (target <= 300us): %s; %s\n",
		m, s + o, verdict(s + o <= 300), (nruns[k16] == 1 ? "one run" : "the sum of the medians of " nruns[k16] " runs")
}

# floor_ratios gives server mode m's medians as ratios of floor mode f's.
function floor_ratios(m, f,    a, b, sa, oa, sb, ob) {
	a = med(m SUBSEP 1, "p50"); b = med(f SUBSEP 1, "p50")
	if (a != "" && b > 0)
		printf "%s p50 at concurrency 1: %.3fms, %s: %.3fms (%.2fx the floor); %s\n", m, a, f, b, a / b,
			medians(nruns[m, 1], nruns[f, 1])
	a = med(m SUBSEP 16, "rps"); b = med(f SUBSEP 16, "rps")
	if (a != "" && b > 0)
		printf "%s throughput at concurrency 16: %d decisions/s, %s: %d (%.2fx the floor); %s\n", m, a, f, b, a / b,
			medians(nruns[m, 16], nruns[f, 16])
	sa = med(m SUBSEP 16, "svc"); oa = med(m SUBSEP 16, "opa")
	sb = med(f SUBSEP 16, "svc"); ob = med(f SUBSEP 16, "opa")
	if (sa != "" && oa != "" && sb != "" && ob != "" && sb + ob > 0)
		printf "%s CPU per decision at concurrency 16: svc %dus + opa %dus, %s: %dus + opa %dus (%.2fx the floor); %s\n",
			m, sa, oa, f, sb, ob, (sa + oa) / (sb + ob), medians(nruns[m, 16], nruns[f, 16])
}
