package flashbench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
	"vouchergate/loadtest/load"

	"github.com/redis/go-redis/v9"
)

// clockTick is the unit of /proc's CPU times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// CPUUse says which processes used the machine's CPU during a measurement. Redis and
// PostgreSQL are the whole shared servers, so other sessions' work on them counts too;
// Machine is every process's, so Machine less the named parts is what else ran.
type CPUUse struct {
	Wall      time.Duration
	Backend   time.Duration // the backend process (or nothing, for the pgbench side)
	Edge      time.Duration // the edge process, when there is one
	Generator time.Duration // this process: the load generator
	Pgbench   time.Duration // the pgbench process, on the pgbench side
	Redis     time.Duration
	Postgres  time.Duration // every postgres process, including those that exited meanwhile
	Machine   time.Duration // busy time of all CPUs
}

// Cores is d as a number of cores busy over the measurement.
func (u CPUUse) Cores(d time.Duration) float64 {
	if u.Wall <= 0 {
		return 0
	}
	return d.Seconds() / u.Wall.Seconds()
}

// PerRequest is d per request at rps requests per second, in microseconds.
func (u CPUUse) PerRequest(d time.Duration, rps float64) float64 {
	if rps <= 0 {
		return 0
	}
	return u.Cores(d) / rps * 1e6
}

// String shows where the CPU went, per request at rps and in cores.
func (u CPUUse) String(rps float64) string {
	var b strings.Builder
	part := func(name string, d time.Duration) {
		if d > 0 {
			fmt.Fprintf(&b, "%s %.0f µs (%.2f), ", name, u.PerRequest(d, rps), u.Cores(d))
		}
	}
	part("backend", u.Backend)
	part("edge", u.Edge)
	part("pgbench", u.Pgbench)
	part("postgres", u.Postgres)
	part("redis", u.Redis)
	part("generator", u.Generator)
	other := u.Machine - u.Backend - u.Edge - u.Pgbench - u.Postgres - u.Redis - u.Generator
	fmt.Fprintf(&b, "other %.2f cores; machine %.2f of %d cores busy", max(0, u.Cores(other)), u.Cores(u.Machine), runtime.NumCPU())
	return b.String()
}

// cpuMeter samples the CPU time of the processes a measurement involves.
type cpuMeter struct {
	backendPID int
	edgePID    int
	redis      *redis.Client
}

type cpuSample struct {
	at                                         time.Time
	backend, edge, self, redis, postgres, busy time.Duration
}

// Other is what neither the named processes nor the servers used: other sessions' work.
func (u CPUUse) Other() time.Duration {
	return max(0, u.Machine-u.Backend-u.Edge-u.Pgbench-u.Postgres-u.Redis-u.Generator)
}

// MeasureCPU runs run and says where the CPU went meanwhile: b, e (if not nil), Redis,
// PostgreSQL, this process and the whole machine.
func MeasureCPU(ctx context.Context, b *Backend, e *Edge, run func() error) (CPUUse, error) {
	m := cpuMeter{backendPID: b.PID, redis: b.redis}
	if e != nil {
		m.edgePID = e.PID
	}
	start := m.sample(ctx)
	err := run()
	return start.until(m.sample(ctx)), err
}

func (m cpuMeter) sample(ctx context.Context) cpuSample {
	s := cpuSample{at: time.Now(), self: load.SelfCPU(), postgres: postgresCPU(), busy: machineBusy()}
	if m.backendPID > 0 {
		s.backend = processCPU(m.backendPID)
	}
	if m.edgePID > 0 {
		s.edge = processCPU(m.edgePID)
	}
	if m.redis != nil {
		s.redis = redisCPU(ctx, m.redis)
	}
	return s
}

func (s cpuSample) until(e cpuSample) CPUUse {
	return CPUUse{Wall: e.at.Sub(s.at), Backend: e.backend - s.backend, Edge: e.edge - s.edge, Generator: e.self - s.self,
		Redis: e.redis - s.redis, Postgres: e.postgres - s.postgres, Machine: e.busy - s.busy}
}

// statFields returns the fields of /proc/PID/stat after the command name.
func statFields(pid string) (comm string, fields []string) {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return "", nil
	}
	open, closing := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || closing < open {
		return "", nil
	}
	return string(b[open+1 : closing]), strings.Fields(string(b[closing+1:]))
}

func ticks(fields []string, i int) time.Duration {
	if i >= len(fields) {
		return 0
	}
	n, _ := strconv.ParseInt(fields[i], 10, 64)
	return time.Duration(n) * clockTick
}

// In statFields' slice: state is 0, ppid 1, utime 11, stime 12, cutime 13, cstime 14.
const (
	fPPID   = 1
	fUtime  = 11
	fStime  = 12
	fCutime = 13
	fCstime = 14
)

func processCPU(pid int) time.Duration {
	_, f := statFields(strconv.Itoa(pid))
	return ticks(f, fUtime) + ticks(f, fStime)
}

// postgresCPU is the CPU time of every postgres process, plus what the postmaster's reaped
// children used (their connections' processes that exited), so a difference of two samples
// counts the connections opened and closed in between.
func postgresCPU() time.Duration {
	entries, _ := os.ReadDir("/proc")
	type proc struct {
		ppid   string
		fields []string
	}
	procs := map[string]proc{}
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		if comm, f := statFields(e.Name()); comm == "postgres" && len(f) > fCstime {
			procs[e.Name()] = proc{f[fPPID], f}
		}
	}
	var total time.Duration
	for _, p := range procs {
		total += ticks(p.fields, fUtime) + ticks(p.fields, fStime)
		if _, child := procs[p.ppid]; !child { // the postmaster
			total += ticks(p.fields, fCutime) + ticks(p.fields, fCstime)
		}
	}
	return total
}

// machineBusy is the CPU time of all CPUs not idle, from /proc/stat.
func machineBusy() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	var busy time.Duration
	for i := 1; i < len(f) && i <= 8; i++ {
		if i == 4 || i == 5 { // idle, iowait
			continue
		}
		busy += ticks(f, i)
	}
	return busy
}

// redisCPU is the Redis server's CPU time from INFO cpu.
func redisCPU(ctx context.Context, rdb *redis.Client) time.Duration {
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			x, _ := strconv.ParseFloat(v, 64)
			total += x
		}
	}
	return time.Duration(total * float64(time.Second))
}
