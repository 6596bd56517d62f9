package api

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"

	"github.com/uagate/gateway/bridge/config"
)

// Writer groups, dataset writers and fields: list, add, change, remove.
// Every change goes through Backend.ApplyConfig with a function that checks
// the state it changes (404 for what is missing, 409 for what is in the
// way) on the copy it changes, so that the check and the change are one
// step and a refused change leaves everything as it was.

func findGroup(c *config.Config, name string) int {
	return slices.IndexFunc(c.WriterGroups, func(g config.WriterGroup) bool { return g.Name == name })
}

func findWriter(g *config.WriterGroup, name string) int {
	return slices.IndexFunc(g.Writers, func(w config.DataSetWriter) bool { return w.Name == name })
}

// findField finds a field by name, else by node id when exactly one field
// has it.
func findField(w *config.DataSetWriter, key string) int {
	if i := slices.IndexFunc(w.Fields, func(f config.Field) bool { return cfgFieldKey(&f) == key }); i >= 0 {
		return i
	}
	at, n := -1, 0
	for i := range w.Fields {
		if w.Fields[i].Node == key {
			at, n = i, n+1
		}
	}
	if n == 1 {
		return at
	}
	return -1
}

func errGroupNotFound(name string) error {
	return fieldProblemf(ErrNotFound, "group", "writer group %q does not exist", name)
}

func errWriterNotFound(group, name string) error {
	return fieldProblemf(ErrNotFound, "writer", "writer group %q has no dataset writer %q", group, name)
}

// lookupGroup returns the group of the request's {group} in c.
func lookupGroup(c *config.Config, r *http.Request) (*config.WriterGroup, error) {
	name := r.PathValue("group")
	i := findGroup(c, name)
	if i < 0 {
		return nil, errGroupNotFound(name)
	}
	return &c.WriterGroups[i], nil
}

// lookupWriter returns the writer of the request's {group} and {writer}.
func lookupWriter(c *config.Config, r *http.Request) (*config.WriterGroup, *config.DataSetWriter, error) {
	g, err := lookupGroup(c, r)
	if err != nil {
		return nil, nil, err
	}
	name := r.PathValue("writer")
	i := findWriter(g, name)
	if i < 0 {
		return nil, nil, errWriterNotFound(g.Name, name)
	}
	return g, &g.Writers[i], nil
}

// runtimeEndpoints returns the names of the endpoints the runtime reports
// (the embedded simulation server has no configuration entry). It is read
// before ApplyConfig: a change function must not call the Backend.
func (s *Server) runtimeEndpoints() map[string]bool {
	out := map[string]bool{}
	for _, e := range s.b.Endpoints() {
		out[e.Name] = true
	}
	return out
}

// checkEndpointRef checks that a group's endpoint exists: configured, or
// known to the runtime.
func checkEndpointRef(c *config.Config, runtime map[string]bool, at, name string) error {
	if runtime[name] || slices.ContainsFunc(c.Endpoints, func(e config.Endpoint) bool { return e.Name == name }) {
		return nil
	}
	return fieldProblemf(ErrInvalid, at, "endpoint %q does not exist", name)
}

// groupStats returns the status of the writer groups that run here, by name.
func (s *Server) groupStats() map[string]*GroupStatus {
	st := s.b.Stats()
	out := make(map[string]*GroupStatus, len(st.Groups))
	for i := range st.Groups {
		gs := groupStatus(&st.Groups[i])
		out[gs.Name] = &gs
	}
	return out
}

func (s *Server) groupResource(g *config.WriterGroup, stats map[string]*GroupStatus) WriterGroup {
	out := groupOf(g)
	out.Status = stats[g.Name]
	return out
}

func (s *Server) listGroups(w http.ResponseWriter, r *http.Request) error {
	c := s.b.Config()
	stats := s.groupStats()
	items := make([]WriterGroup, len(c.WriterGroups))
	for i := range c.WriterGroups {
		items[i] = s.groupResource(&c.WriterGroups[i], stats)
	}
	p, err := paginate(r, items, func(g *WriterGroup) string { return g.Name })
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, p)
}

func (s *Server) getGroup(w http.ResponseWriter, r *http.Request) error {
	g, err := lookupGroup(s.b.Config(), r)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, s.groupResource(g, s.groupStats()))
}

func (s *Server) createGroup(w http.ResponseWriter, r *http.Request) error {
	var g WriterGroup
	if err := decodeJSON(r, s.opts.MaxBodyBytes, &g); err != nil {
		return err
	}
	if err := checkGroup("", &g); err != nil {
		return err
	}
	known := s.runtimeEndpoints()
	err := s.b.ApplyConfig(r.Context(), func(c *config.Config) error {
		if findGroup(c, g.Name) >= 0 {
			return fieldProblemf(ErrConflict, "/name", "writer group %q exists already", g.Name)
		}
		if err := checkEndpointRef(c, known, "/endpoint", g.Endpoint); err != nil {
			return err
		}
		c.WriterGroups = append(c.WriterGroups, g.config())
		return nil
	})
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/v1/writer-groups/"+url.PathEscape(g.Name))
	return s.answerGroup(w, g.Name, http.StatusCreated)
}

// answerGroup answers with a group as it is configured now.
func (s *Server) answerGroup(w http.ResponseWriter, name string, status int) error {
	c := s.b.Config()
	i := findGroup(c, name)
	if i < 0 {
		return errGroupNotFound(name)
	}
	return writeJSON(w, status, s.groupResource(&c.WriterGroups[i], s.groupStats()))
}

func (s *Server) putGroup(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("group")
	var g WriterGroup
	if err := decodeJSON(r, s.opts.MaxBodyBytes, &g); err != nil {
		return err
	}
	if g.Name == "" {
		g.Name = name
	}
	if g.Name != name {
		return fieldProblemf(ErrInvalid, "/name", "the body names writer group %q, the path %q; a group cannot be renamed", g.Name, name)
	}
	if err := checkGroup("", &g); err != nil {
		return err
	}
	known := s.runtimeEndpoints()
	err := s.b.ApplyConfig(r.Context(), func(c *config.Config) error {
		i := findGroup(c, name)
		if i < 0 {
			return errGroupNotFound(name)
		}
		if err := checkEndpointRef(c, known, "/endpoint", g.Endpoint); err != nil {
			return err
		}
		c.WriterGroups[i] = g.config()
		return nil
	})
	if err != nil {
		return err
	}
	return s.answerGroup(w, name, http.StatusOK)
}

func (s *Server) deleteGroup(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("group")
	err := s.b.ApplyConfig(r.Context(), func(c *config.Config) error {
		i := findGroup(c, name)
		if i < 0 {
			return errGroupNotFound(name)
		}
		c.WriterGroups = slices.Delete(c.WriterGroups, i, i+1)
		return nil
	})
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) listWriters(w http.ResponseWriter, r *http.Request) error {
	g, err := lookupGroup(s.b.Config(), r)
	if err != nil {
		return err
	}
	items := groupOf(g).Writers
	p, err := paginate(r, items, func(d *DataSetWriter) string { return d.Name })
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, p)
}

func (s *Server) getWriter(w http.ResponseWriter, r *http.Request) error {
	_, d, err := lookupWriter(s.b.Config(), r)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, writerOf(d))
}

// checkWriterID refuses a DataSetWriterId another writer of the group has.
func checkWriterID(g *config.WriterGroup, self int, id uint16) error {
	if id == 0 {
		return nil
	}
	for i := range g.Writers {
		if i != self && g.Writers[i].ID == id {
			return fieldProblemf(ErrConflict, "/id", "DataSetWriterId %d is that of dataset writer %q", id, g.Writers[i].Name)
		}
	}
	return nil
}

func (s *Server) createWriter(w http.ResponseWriter, r *http.Request) error {
	var d DataSetWriter
	if err := decodeJSON(r, s.opts.MaxBodyBytes, &d); err != nil {
		return err
	}
	if err := checkWriter("", &d); err != nil {
		return err
	}
	group := r.PathValue("group")
	err := s.b.ApplyConfig(r.Context(), func(c *config.Config) error {
		g, err := lookupGroup(c, r)
		if err != nil {
			return err
		}
		if findWriter(g, d.Name) >= 0 {
			return fieldProblemf(ErrConflict, "/name", "writer group %q has a dataset writer %q already", g.Name, d.Name)
		}
		if err := checkWriterID(g, -1, d.ID); err != nil {
			return err
		}
		g.Writers = append(g.Writers, d.config())
		return nil
	})
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/v1/writer-groups/"+url.PathEscape(group)+"/writers/"+url.PathEscape(d.Name))
	return s.answerWriter(w, group, d.Name, http.StatusCreated)
}

func (s *Server) answerWriter(w http.ResponseWriter, group, name string, status int) error {
	c := s.b.Config()
	gi := findGroup(c, group)
	if gi < 0 {
		return errGroupNotFound(group)
	}
	g := &c.WriterGroups[gi]
	wi := findWriter(g, name)
	if wi < 0 {
		return errWriterNotFound(group, name)
	}
	return writeJSON(w, status, writerOf(&g.Writers[wi]))
}

func (s *Server) putWriter(w http.ResponseWriter, r *http.Request) error {
	group, name := r.PathValue("group"), r.PathValue("writer")
	var d DataSetWriter
	if err := decodeJSON(r, s.opts.MaxBodyBytes, &d); err != nil {
		return err
	}
	if d.Name == "" {
		d.Name = name
	}
	if d.Name != name {
		return fieldProblemf(ErrInvalid, "/name", "the body names dataset writer %q, the path %q; a writer cannot be renamed", d.Name, name)
	}
	if err := checkWriter("", &d); err != nil {
		return err
	}
	err := s.b.ApplyConfig(r.Context(), func(c *config.Config) error {
		g, err := lookupGroup(c, r)
		if err != nil {
			return err
		}
		i := findWriter(g, name)
		if i < 0 {
			return errWriterNotFound(group, name)
		}
		if err := checkWriterID(g, i, d.ID); err != nil {
			return err
		}
		g.Writers[i] = d.config()
		return nil
	})
	if err != nil {
		return err
	}
	return s.answerWriter(w, group, name, http.StatusOK)
}

func (s *Server) deleteWriter(w http.ResponseWriter, r *http.Request) error {
	err := s.b.ApplyConfig(r.Context(), func(c *config.Config) error {
		g, d, err := lookupWriter(c, r)
		if err != nil {
			return err
		}
		i := findWriter(g, d.Name)
		g.Writers = slices.Delete(g.Writers, i, i+1)
		return nil
	})
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// FieldsRequest adds fields to a dataset writer, all or none.
type FieldsRequest struct {
	Fields []Field `json:"fields" doc:"the fields to add, after the writer's own"`
}

func (s *Server) listFields(w http.ResponseWriter, r *http.Request) error {
	_, d, err := lookupWriter(s.b.Config(), r)
	if err != nil {
		return err
	}
	items := writerOf(d).Fields
	p, err := paginate(r, items, func(f *Field) string { return f.key() })
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, p)
}

func (s *Server) addFields(w http.ResponseWriter, r *http.Request) error {
	var req FieldsRequest
	if err := decodeJSON(r, s.opts.MaxBodyBytes, &req); err != nil {
		return err
	}
	if len(req.Fields) == 0 {
		return fieldProblemf(ErrInvalid, "/fields", "no fields to add")
	}
	seen := map[string]int{}
	for i := range req.Fields {
		at := fmt.Sprintf("/fields/%d", i)
		if err := checkField(at, &req.Fields[i]); err != nil {
			return err
		}
		k := req.Fields[i].key()
		if j, dup := seen[k]; dup {
			return fieldProblemf(ErrInvalid, at+"/name", "field %q is also fields[%d]", k, j)
		}
		seen[k] = i
	}
	group, writer := r.PathValue("group"), r.PathValue("writer")
	err := s.b.ApplyConfig(r.Context(), func(c *config.Config) error {
		_, d, err := lookupWriter(c, r)
		if err != nil {
			return err
		}
		for i := range req.Fields {
			k := req.Fields[i].key()
			if slices.ContainsFunc(d.Fields, func(f config.Field) bool { return cfgFieldKey(&f) == k }) {
				return fieldProblemf(ErrConflict, fmt.Sprintf("/fields/%d/name", i), "dataset writer %q has a field %q already", d.Name, k)
			}
		}
		for i := range req.Fields {
			d.Fields = append(d.Fields, req.Fields[i].config())
		}
		return nil
	})
	if err != nil {
		return err
	}
	return s.answerWriter(w, group, writer, http.StatusOK)
}

func (s *Server) putField(w http.ResponseWriter, r *http.Request) error {
	key := r.PathValue("field")
	var f Field
	if err := decodeJSON(r, s.opts.MaxBodyBytes, &f); err != nil {
		return err
	}
	if err := checkField("", &f); err != nil {
		return err
	}
	group, writer := r.PathValue("group"), r.PathValue("writer")
	err := s.b.ApplyConfig(r.Context(), func(c *config.Config) error {
		_, d, err := lookupWriter(c, r)
		if err != nil {
			return err
		}
		i := findField(d, key)
		if i < 0 {
			return fieldProblemf(ErrNotFound, "field", "dataset writer %q has no field %q", d.Name, key)
		}
		nk := f.key()
		for j := range d.Fields {
			if j != i && cfgFieldKey(&d.Fields[j]) == nk {
				return fieldProblemf(ErrConflict, "/name", "dataset writer %q has another field %q", d.Name, nk)
			}
		}
		d.Fields[i] = f.config()
		return nil
	})
	if err != nil {
		return err
	}
	return s.answerWriter(w, group, writer, http.StatusOK)
}

func (s *Server) deleteField(w http.ResponseWriter, r *http.Request) error {
	key := r.PathValue("field")
	err := s.b.ApplyConfig(r.Context(), func(c *config.Config) error {
		_, d, err := lookupWriter(c, r)
		if err != nil {
			return err
		}
		i := findField(d, key)
		if i < 0 {
			return fieldProblemf(ErrNotFound, "field", "dataset writer %q has no field %q", d.Name, key)
		}
		d.Fields = slices.Delete(d.Fields, i, i+1)
		return nil
	})
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
