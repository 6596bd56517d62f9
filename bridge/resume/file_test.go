package resume

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/uagate/gateway/uastack/client"
)

func TestFileStore(t *testing.T) {
	dir := t.TempDir()
	f, err := NewFileStore(filepath.Join(dir, "resume"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := f.LoadResume("g/1"); ok || err != nil {
		t.Fatalf("empty store: %v %v", ok, err)
	}
	rec := Record{Fingerprint: "fp", Saved: time.Unix(100, 0).UTC(), State: client.ResumeState{
		SubscriptionID: 7, LastAcked: 41, Items: []client.ResumeItem{{Handle: 1, ServerID: 100}, {Handle: 2, ServerID: 101}},
	}}
	if err := f.SaveResume("g/1", rec); err != nil {
		t.Fatal(err)
	}
	rec.State.LastAcked = 42
	if err := f.SaveResume("g/1", rec); err != nil {
		t.Fatal(err)
	}
	got, ok, err := f.LoadResume("g/1")
	if !ok || err != nil || got.State.LastAcked != 42 || got.State.SubscriptionID != 7 || len(got.State.Items) != 2 ||
		got.State.Items[1] != (client.ResumeItem{Handle: 2, ServerID: 101}) || got.Fingerprint != "fp" || !got.Saved.Equal(rec.Saved) {
		t.Fatalf("loaded %+v %v %v", got, ok, err)
	}
	// No temporary files are left, and the group name cannot escape the directory.
	ents, _ := os.ReadDir(f.Dir)
	if len(ents) != 1 || ents[0].Name() != "g%2F1.json" {
		t.Fatalf("files %v", ents)
	}
	// A torn or foreign file is an error, not a panic or a silent resume.
	if err := os.WriteFile(filepath.Join(f.Dir, "bad.json"), []byte(`{"state":{"subscriptionId":`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := f.LoadResume("bad"); ok || err == nil {
		t.Fatalf("torn file: %v %v", ok, err)
	}
	if err := f.Remove("g/1"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := f.LoadResume("g/1"); ok {
		t.Fatal("removed record still there")
	}
}
