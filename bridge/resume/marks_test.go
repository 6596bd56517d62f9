package resume

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
)

func TestMarks(t *testing.T) {
	dir := t.TempDir()
	m, err := OpenMarks(dir, "g/1", 1, 4)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := m.Previous(); ok {
		t.Fatal("a new file has previous marks")
	}
	a, wm, err := m.Slot("a")
	if err != nil || wm != (WriterMark{}) {
		t.Fatal(wm, err)
	}
	m.SetWriter(a, WriterMark{Seq: 7, Frames: 3})
	// More writers than the file was laid out for: it grows.
	var slots []int
	for i := range 9 {
		s, _, err := m.Slot("w" + strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		m.SetWriter(s, WriterMark{Seq: uint32(100 + i), Frames: uint64(i)})
		slots = append(slots, s)
	}
	if again, wm, _ := m.Slot("a"); again != a || wm != (WriterMark{Seq: 7, Frames: 3}) {
		t.Fatalf("writer a got slot %d, then %d with %+v", a, again, wm)
	}
	m.SetHandled(5, 41)
	for n := uint32(1); n <= 10; n++ { // wraps the ring of 4
		m.SetRing(a, n, RingMark{Seq: 10 * n, Frames: uint64(n)})
	}
	m.SetWriter(a, WriterMark{Seq: 111, Frames: 11})
	m.SetWriter(slots[8], WriterMark{Seq: 9999, Frames: 8})
	if err := m.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	m2, err := OpenMarks(dir, "g/1", 2, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	if sub, h, ok := m2.Previous(); !ok || sub != 5 || h != 41 {
		t.Fatalf("previous %d %d %v", sub, h, ok)
	}
	if _, wm, _ := m2.Slot("a"); wm != (WriterMark{Seq: 111, Frames: 11}) {
		t.Fatalf("writer a: %+v", wm)
	}
	if _, wm, _ := m2.Slot("w8"); wm.Seq != 9999 {
		t.Fatalf("writer w8: %+v", wm)
	}
	if _, wm, _ := m2.Slot("nobody"); wm != (WriterMark{}) {
		t.Fatal("a writer that never was", wm)
	}
	for n := uint32(7); n <= 10; n++ {
		if rm, ok := m2.PreviousRing("a", n); !ok || rm.Seq != 10*n || rm.Frames != uint64(n) {
			t.Fatalf("ring %d: %+v %v", n, rm, ok)
		}
	}
	if _, ok := m2.PreviousRing("a", 6); ok {
		t.Fatal("an entry the ring overwrote")
	}
	// The new file keeps the writers until the group takes its slots.
	m3 := parseMarks(mustRead(t, MarksPath(dir, "g/1")))
	if !m3.ok || m3.writers[nameHash("a")].mark.Seq != 111 || m3.handled != 41 {
		t.Fatalf("reopened file: %+v", m3)
	}
	// A torn or foreign file is no marks, not an error.
	if err := os.WriteFile(MarksPath(dir, "bad"), []byte("UAGMARK1\x04"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad, err := OpenMarks(dir, "bad", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := bad.Previous(); ok {
		t.Fatal("a torn file read as marks")
	}
	bad.Close()
	if err := RemoveMarks(dir, "bad"); err != nil {
		t.Fatal(err)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMarksSurviveKill: what a process stored into its marks before it was
// killed (no Sync, no Close) is what the next one reads.
func TestMarksSurviveKill(t *testing.T) {
	if dir := os.Getenv("UAGATE_TEST_MARKS_CHILD"); dir != "" {
		m, err := OpenMarks(dir, "g", 1, 8)
		if err != nil {
			os.Exit(2)
		}
		s, _, _ := m.Slot("w")
		for n := uint32(1); n <= 1000; n++ {
			m.SetHandled(9, n)
			m.SetWriter(s, WriterMark{Seq: n + 1, Frames: uint64(n)})
		}
		os.Stdout.WriteString("stored\n")
		select {} // killed here
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestMarksSurviveKill$")
	cmd.Env = append(os.Environ(), "UAGATE_TEST_MARKS_CHILD="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 7)
	if _, err := out.Read(buf); err != nil || string(buf) != "stored\n" {
		t.Fatalf("child: %q %v", buf, err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	m, err := OpenMarks(dir, "g", 1, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if sub, h, ok := m.Previous(); !ok || sub != 9 || h != 1000 {
		t.Fatalf("previous %d %d %v", sub, h, ok)
	}
	if _, wm, _ := m.Slot("w"); wm.Seq != 1001 {
		t.Fatalf("writer %+v", wm)
	}
}

func TestTimes(t *testing.T) {
	dir := t.TempDir()
	tm, err := OpenTimes(dir, "g/1", 3)
	if err != nil {
		t.Fatal(err)
	}
	if tm.Previous(0) != 0 {
		t.Fatal("a new file has previous times")
	}
	tm.Set(0, 100)
	tm.Set(2, 300)
	tm.Set(7, 700) // beyond the file: ignored
	if err := tm.Grow(10); err != nil {
		t.Fatal(err)
	}
	tm.Set(7, 700)
	if err := tm.Close(); err != nil {
		t.Fatal(err)
	}
	tm2, err := OpenTimes(dir, "g/1", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer tm2.Close()
	for i, want := range map[int]int64{0: 100, 1: 0, 2: 300, 7: 700, 50: 0} {
		if got := tm2.Previous(i); got != want {
			t.Errorf("slot %d: %d, want %d", i, got, want)
		}
	}
}
