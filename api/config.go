package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/goccy/go-yaml"
)

// The running configuration and the state of the last change applied to it.

// ConfigReporter is implemented by a Backend that applies changes writer
// group by writer group and can retry what failed.
type ConfigReporter interface {
	// ApplyState returns the outcome of the last change applied (from the
	// API or the configuration file) and whether a part of it is pending.
	ApplyState() ApplyState
	// RetryConfig applies again the configuration last asked for; its error
	// is ErrConflict when a part still fails.
	RetryConfig(ctx context.Context) error
}

// ApplyState is the outcome of the last change applied.
type ApplyState struct {
	// Pending: a part of the configuration last asked for does not run
	// (see Failed); POST /api/v1/config/retry or saving the file again
	// tries it again.
	Pending bool      `json:"pending"`
	At      time.Time `json:"at,omitzero"`
	// Applied lists the writer groups whose change took effect.
	Applied []string `json:"applied"`
	// Failed lists the writer groups whose change did not: each runs as it
	// was (a new one not at all).
	Failed []ApplyFailure `json:"failed"`
}

// ApplyFailure is a writer group whose change could not be applied.
type ApplyFailure struct {
	Group string `json:"group"`
	Error string `json:"error"`
}

// ConfigView is the answer of GET /api/v1/config: the running configuration
// (secrets redacted), which is what runs, and the last apply's outcome.
type ConfigView struct {
	Config    map[string]any `json:"config"`
	LastApply ApplyState     `json:"lastApply"`
}

func (s *Server) configView() (ConfigView, error) {
	b, err := yaml.Marshal(s.b.Config())
	if err != nil {
		return ConfigView{}, err
	}
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		return ConfigView{}, err
	}
	v := ConfigView{Config: map[string]any{}, LastApply: ApplyState{Applied: []string{}, Failed: []ApplyFailure{}}}
	if err := json.Unmarshal(j, &v.Config); err != nil {
		return ConfigView{}, err
	}
	if cr, ok := s.b.(ConfigReporter); ok {
		v.LastApply = cr.ApplyState()
	}
	return v, nil
}

func (s *Server) getConfig(w http.ResponseWriter, r *http.Request) error {
	v, err := s.configView()
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, v)
}

func (s *Server) retryConfig(w http.ResponseWriter, r *http.Request) error {
	cr, ok := s.b.(ConfigReporter)
	if !ok {
		return fmt.Errorf("%w: this gateway does not retry configuration changes", ErrConflict)
	}
	if err := cr.RetryConfig(r.Context()); err != nil {
		return err
	}
	v, err := s.configView()
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, v)
}
