package api

import (
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/uagate/gateway/bridge/config"
)

// EndpointConfig is the configuration of an upstream endpoint. Secrets are
// write-only: a password is accepted, never returned. A PUT without one
// keeps the password configured before only while it goes where it went:
// a PUT that changes the URL, the security policy or mode, the identity's
// type or user, or trusts unknown certificates (autoAccept) must give the
// password again (a stored password is never sent to another server).
type EndpointConfig struct {
	Name            string    `json:"name"`
	URL             string    `json:"url" doc:"opc.tcp://host:port/path"`
	SecurityPolicy  string    `json:"securityPolicy,omitempty" doc:"None, Basic256Sha256, Aes128_Sha256_RsaOaep, Aes256_Sha256_RsaPss, a policy URI, or best (default)"`
	SecurityMode    string    `json:"securityMode,omitempty" doc:"None, Sign, SignAndEncrypt or best (default)"`
	Identity        *Identity `json:"identity,omitempty"`
	PKI             string    `json:"pki,omitempty" doc:"certificate store directory"`
	AutoAccept      bool      `json:"autoAccept,omitempty" doc:"trust unknown server certificates (development only)"`
	AllowDeprecated bool      `json:"allowDeprecated,omitempty"`
	RequestTimeout  *Duration `json:"requestTimeout,omitempty"`
	SessionTimeout  *Duration `json:"sessionTimeout,omitempty"`
	MaxMessageSize  int       `json:"maxMessageSize,omitempty"`
	Sessions        int       `json:"sessions,omitempty" doc:"sessions opened to the endpoint, its writer groups spread over them; default 1"`
}

// Identity is the user a session is activated as.
type Identity struct {
	Type     string `json:"type,omitempty" doc:"anonymous (default), username or x509"`
	Username string `json:"username,omitempty"`
	// Password is write-only.
	Password     string `json:"password,omitempty" doc:"write-only: never returned"`
	PasswordFile string `json:"passwordFile,omitempty" doc:"file holding the password"`
	PasswordEnv  string `json:"passwordEnv,omitempty" doc:"environment variable holding the password"`
	HasPassword  bool   `json:"hasPassword,omitempty" doc:"read-only: a password is configured"`
	CertFile     string `json:"certFile,omitempty"`
	KeyFile      string `json:"keyFile,omitempty"`
}

// Endpoint is an endpoint's state and, when it is configured, its
// configuration.
type Endpoint struct {
	EndpointStatus
	Config *EndpointConfig `json:"config,omitempty"`
}

func endpointConfigOf(e *config.Endpoint) *EndpointConfig {
	out := &EndpointConfig{Name: e.Name, URL: e.URL, SecurityPolicy: e.SecurityPolicy, SecurityMode: e.SecurityMode,
		PKI: e.PKI, AutoAccept: e.AutoAccept, AllowDeprecated: e.AllowDeprecated,
		RequestTimeout: durPtr(e.RequestTimeout), SessionTimeout: durPtr(e.SessionTimeout), MaxMessageSize: e.MaxMessageSize,
		Sessions: e.Sessions}
	id := e.Identity
	if id != (config.Identity{}) {
		out.Identity = &Identity{Type: id.Type, Username: id.Username, PasswordFile: id.Password.File, PasswordEnv: id.Password.Env,
			HasPassword: id.Password != (config.Secret{}), CertFile: id.CertFile, KeyFile: id.KeyFile}
	}
	return out
}

func (e *EndpointConfig) config(old *config.Endpoint) (config.Endpoint, error) {
	out := config.Endpoint{Name: e.Name, URL: e.URL, SecurityPolicy: e.SecurityPolicy, SecurityMode: e.SecurityMode,
		PKI: e.PKI, AutoAccept: e.AutoAccept, AllowDeprecated: e.AllowDeprecated,
		RequestTimeout: cfgDur(e.RequestTimeout), SessionTimeout: cfgDur(e.SessionTimeout), MaxMessageSize: e.MaxMessageSize,
		Sessions: e.Sessions}
	if id := e.Identity; id != nil {
		out.Identity = config.Identity{Type: id.Type, Username: id.Username, CertFile: id.CertFile, KeyFile: id.KeyFile,
			Password: config.Secret{Value: id.Password, File: id.PasswordFile, Env: id.PasswordEnv}}
		if out.Identity.Password == (config.Secret{}) && old != nil && old.Identity.Password.IsSet() &&
			old.Identity.Username == id.Username && old.Identity.Type == id.Type {
			if what := rebound(old, &out); what != "" {
				return out, fieldProblemf(ErrInvalid, "/identity/password",
					"the endpoint's %s changed: give the password again (a stored password is not sent elsewhere)", what)
			}
			out.Identity.Password = old.Identity.Password
		}
	}
	return out, nil
}

// rebound names what of where a password goes differs between old and new
// ("" when nothing does).
func rebound(old, new *config.Endpoint) string {
	switch {
	case !strings.EqualFold(strings.TrimRight(old.URL, "/"), strings.TrimRight(new.URL, "/")):
		return "URL"
	case !strings.EqualFold(old.SecurityPolicy, new.SecurityPolicy) && new.SecurityPolicy != "":
		return "security policy"
	case !strings.EqualFold(old.SecurityMode, new.SecurityMode) && new.SecurityMode != "":
		return "security mode"
	case new.AutoAccept && !old.AutoAccept:
		return "certificate trust (autoAccept)"
	}
	return ""
}

func checkEndpointConfig(e *EndpointConfig) error {
	if err := checkName("/name", "endpoint", e.Name); err != nil {
		return err
	}
	u, err := url.Parse(e.URL)
	if err != nil || u.Scheme != "opc.tcp" || u.Host == "" {
		return fieldProblemf(ErrInvalid, "/url", "endpoint URL %q: want opc.tcp://host:port[/path]", e.URL)
	}
	if err := checkOneOf("/securityMode", e.SecurityMode, "None", "Sign", "SignAndEncrypt", "best"); err != nil {
		return err
	}
	if id := e.Identity; id != nil {
		if err := checkOneOf("/identity/type", id.Type, "anonymous", "username", "x509"); err != nil {
			return err
		}
		if id.Type == "username" && id.Username == "" {
			return fieldProblemf(ErrInvalid, "/identity/username", "a username identity needs a username")
		}
		if id.Type == "x509" && (id.CertFile == "" || id.KeyFile == "") {
			return fieldProblemf(ErrInvalid, "/identity/certFile", "an x509 identity needs certFile and keyFile")
		}
		if id.HasPassword {
			return fieldProblemf(ErrInvalid, "/identity/hasPassword", "hasPassword is read-only")
		}
	}
	for _, c := range []error{
		checkDuration("/requestTimeout", e.RequestTimeout),
		checkDuration("/sessionTimeout", e.SessionTimeout),
		checkNotNegative("/maxMessageSize", e.MaxMessageSize),
		checkNotNegative("/sessions", e.Sessions),
	} {
		if c != nil {
			return c
		}
	}
	return nil
}

func findEndpoint(c *config.Config, name string) int {
	return slices.IndexFunc(c.Endpoints, func(e config.Endpoint) bool { return e.Name == name })
}

func (s *Server) endpointResource(st EndpointStatus, c *config.Config) Endpoint {
	out := Endpoint{EndpointStatus: st}
	if i := findEndpoint(c, st.Name); i >= 0 {
		out.Config = endpointConfigOf(&c.Endpoints[i])
	}
	return out
}

// endpointList is the runtime's endpoints, then configured ones it does not
// report yet. Below the admin role the gateway's own file paths (its PKI
// store, key and password files) are left out, from the errors too.
func (s *Server) endpointList(r *http.Request) []Endpoint {
	c := s.b.Config()
	var out []Endpoint
	seen := map[string]bool{}
	for _, st := range s.b.Endpoints() {
		out = append(out, s.endpointResource(st, c))
		seen[st.Name] = true
	}
	for i := range c.Endpoints {
		e := &c.Endpoints[i]
		if !seen[e.Name] {
			out = append(out, Endpoint{EndpointStatus: NewEndpointStatus(e.Name, e.URL, nil), Config: endpointConfigOf(e)})
		}
	}
	if roleOf(r) < RoleAdmin {
		for i := range out {
			out[i].LastError = redactPaths(out[i].LastError)
			if cf := out[i].Config; cf != nil {
				cf.PKI = ""
				if id := cf.Identity; id != nil {
					id.PasswordFile, id.CertFile, id.KeyFile = redactPaths(id.PasswordFile), redactPaths(id.CertFile), redactPaths(id.KeyFile)
				}
			}
		}
	}
	return out
}

// localPath is a file path of two or more elements.
var localPath = regexp.MustCompile(`(?:[A-Za-z]:)?(?:[/\\][^/\\\s:"'()]+){2,}`)

// redactPaths replaces the directories of the file paths in s: "…/name".
func redactPaths(s string) string {
	return localPath.ReplaceAllStringFunc(s, func(p string) string {
		return "…/" + p[strings.LastIndexAny(p, `/\`)+1:]
	})
}

// roleOf is the role a request was authorized with.
func roleOf(r *http.Request) Role {
	if who, _ := r.Context().Value(ctxPrincipal).(*principal); who != nil {
		return who.role
	}
	return RolePublic
}

func (s *Server) listEndpoints(w http.ResponseWriter, r *http.Request) error {
	p, err := paginate(r, s.endpointList(r), func(e *Endpoint) string { return e.Name })
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, p)
}

func errEndpointNotFound(name string) error {
	return fieldProblemf(ErrNotFound, "endpoint", "endpoint %q does not exist", name)
}

func (s *Server) getEndpoint(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("endpoint")
	for _, e := range s.endpointList(r) {
		if e.Name == name {
			return writeJSON(w, http.StatusOK, e)
		}
	}
	return errEndpointNotFound(name)
}

func (s *Server) answerEndpoint(w http.ResponseWriter, r *http.Request, name string, status int) error {
	for _, e := range s.endpointList(r) {
		if e.Name == name {
			return writeJSON(w, status, e)
		}
	}
	return errEndpointNotFound(name)
}

func (s *Server) createEndpoint(w http.ResponseWriter, r *http.Request) error {
	var e EndpointConfig
	if err := decodeJSON(r, s.opts.MaxBodyBytes, &e); err != nil {
		return err
	}
	if err := checkEndpointConfig(&e); err != nil {
		return err
	}
	known := s.runtimeEndpoints()
	err := s.b.ApplyConfig(r.Context(), func(c *config.Config) error {
		if findEndpoint(c, e.Name) >= 0 || known[e.Name] {
			return fieldProblemf(ErrConflict, "/name", "endpoint %q exists already", e.Name)
		}
		ep, err := e.config(nil)
		if err != nil {
			return err
		}
		c.Endpoints = append(c.Endpoints, ep)
		return nil
	})
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/v1/endpoints/"+url.PathEscape(e.Name))
	return s.answerEndpoint(w, r, e.Name, http.StatusCreated)
}

func (s *Server) putEndpoint(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("endpoint")
	var e EndpointConfig
	if err := decodeJSON(r, s.opts.MaxBodyBytes, &e); err != nil {
		return err
	}
	if e.Name == "" {
		e.Name = name
	}
	if e.Name != name {
		return fieldProblemf(ErrInvalid, "/name", "the body names endpoint %q, the path %q; an endpoint cannot be renamed", e.Name, name)
	}
	if err := checkEndpointConfig(&e); err != nil {
		return err
	}
	err := s.b.ApplyConfig(r.Context(), func(c *config.Config) error {
		i := findEndpoint(c, name)
		if i < 0 {
			return errEndpointNotFound(name)
		}
		ep, err := e.config(&c.Endpoints[i])
		if err != nil {
			return err
		}
		c.Endpoints[i] = ep
		return nil
	})
	if err != nil {
		return err
	}
	return s.answerEndpoint(w, r, name, http.StatusOK)
}

func (s *Server) deleteEndpoint(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("endpoint")
	err := s.b.ApplyConfig(r.Context(), func(c *config.Config) error {
		i := findEndpoint(c, name)
		if i < 0 {
			return errEndpointNotFound(name)
		}
		var users []string
		for _, g := range c.WriterGroups {
			if g.Endpoint == name {
				users = append(users, g.Name)
			}
		}
		if len(users) > 0 {
			return problemf(ErrConflict, "endpoint %q is used by writer groups %s; remove them first", name, strings.Join(users, ", "))
		}
		c.Endpoints = slices.Delete(c.Endpoints, i, i+1)
		return nil
	})
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
