package history

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// Dir is where the history of a failed test is kept: <os.TempDir()>/vouchergate-histories/<test>/,
// the test's name with each character other than a letter, digit, '.', '_' or '-' as '_'. It
// holds history.jsonl (the vouchers told, then every operation) and, for each rejected
// partition the report tells, <partition>.html: porcupine's view of its smallest failing window.
func Dir(test string) string {
	return filepath.Join(os.TempDir(), "vouchergate-histories", unsafeChars.ReplaceAllString(test, "_"))
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]`)

var (
	forMu     sync.Mutex
	recorders = map[testing.TB]*Recorder{}
)

// For returns t's recorder, the same one on every call, and checks its history when t ends:
// a history the models reject fails t with the smallest failing window of each rejected
// partition, and so does one with a partition the check could not decide within Timeout (a
// history nobody checked proves nothing); the history of a failed t is kept in Dir(t.Name()).
func For(t testing.TB) *Recorder {
	forMu.Lock()
	defer forMu.Unlock()
	if r, ok := recorders[t]; ok {
		return r
	}
	r := NewRecorder()
	recorders[t] = r
	t.Cleanup(func() {
		forMu.Lock()
		delete(recorders, t)
		forMu.Unlock()
		r.Verify(t)
	})
	return r
}

// Verify checks the history so far and fails t if the models reject it or a partition is not
// decided within Timeout, keeping it in Dir(t.Name()) when t has failed.
func (r *Recorder) Verify(t testing.TB) {
	t.Helper()
	ops := r.Ops()
	if len(ops) == 0 {
		return
	}
	res := Check(ops, r.Vouchers())
	verdict := "linearizable"
	switch {
	case !res.Linearizable():
		verdict = fmt.Sprintf("NOT linearizable (%d partitions rejected)", len(res.Failures))
	case !res.Decided():
		verdict = fmt.Sprintf("NOT CHECKED (%d partitions undecided)", len(res.Undecided))
	}
	t.Logf("history: %d operations in %d partitions, %s, checked in %s", res.Ops, res.Partitions, verdict, res.Took.Round(time.Millisecond))
	if res.Linearizable() && res.Decided() && !t.Failed() {
		return
	}
	dir := r.keep(t, ops, res)
	if !res.Linearizable() || !res.Decided() {
		t.Errorf("%s", res.Report(dir))
	}
}

// keep writes the history (and the views of rejected partitions) to Dir(t.Name()) and returns
// the directory.
func (r *Recorder) keep(t testing.TB, ops []Op, res Result) string {
	t.Helper()
	dir := Dir(t.Name())
	if err := r.write(dir, ops, res); err != nil {
		t.Logf("history: keep in %s: %v", dir, err)
		return dir
	}
	t.Logf("history: kept in %s", dir)
	return dir
}

func (r *Recorder) write(dir string, ops []Op, res Result) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		return err
	}
	if err := WriteJSONLines(f, ops, r.Vouchers()); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	for _, fl := range res.Failures[:min(len(res.Failures), reported)] {
		if fl.part == nil {
			continue
		}
		v, err := os.Create(filepath.Join(dir, viewName(fl.Partition)))
		if err != nil {
			return err
		}
		err = fl.Visualize(v)
		if cerr := v.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func viewName(partition string) string { return unsafeChars.ReplaceAllString(partition, "_") + ".html" }

// reported is how many rejected partitions a report tells, the earliest first.
const reported = 5

// Report tells the earliest rejected partitions, those not decided, and where the history is
// kept (dir; "" for none).
func (res Result) Report(dir string) string {
	var b strings.Builder
	switch {
	case !res.Linearizable():
		fmt.Fprintf(&b, "history not linearizable: %d of %d partitions rejected", len(res.Failures), res.Partitions)
	default:
		fmt.Fprintf(&b, "history not checked: %d of %d partitions not decided within %s", len(res.Undecided), res.Partitions, Timeout)
	}
	for _, f := range res.Failures[:min(len(res.Failures), reported)] {
		fmt.Fprintf(&b, "\n%s", f)
		if dir != "" && f.part != nil {
			fmt.Fprintf(&b, "\n  view: %s", filepath.Join(dir, viewName(f.Partition)))
		}
	}
	if n := len(res.Failures) - reported; n > 0 {
		fmt.Fprintf(&b, "\n... and %d more rejected partitions:", n)
		for _, f := range res.Failures[reported:] {
			fmt.Fprintf(&b, " %s;", f.Partition)
		}
	}
	if !res.Decided() {
		fmt.Fprintf(&b, "\nnot decided within %s (not checked): %s", Timeout, strings.Join(res.Undecided, "; "))
	}
	if dir != "" {
		fmt.Fprintf(&b, "\nhistory: %s", filepath.Join(dir, "history.jsonl"))
	}
	return b.String()
}
