package api

import (
	"encoding"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	json "github.com/goccy/go-json"
)

// The OpenAPI 3.1 document is generated from the route table and the Go
// types of the bodies (reflection, once, at New): what the handlers decode
// and encode is what the document says. Struct tags: json for the member
// names (omitempty: optional), doc for the description.

type schemaGen struct {
	components map[string]any
	names      map[reflect.Type]string
}

var (
	durationType      = reflect.TypeOf(Duration(0))
	rawType           = reflect.TypeOf(json.RawMessage(nil))
	timeType          = reflect.TypeOf(time.Time{})
	textMarshalerType = reflect.TypeOf((*encoding.TextMarshaler)(nil)).Elem()
	genericArg        = regexp.MustCompile(`\[.*\.([A-Za-z0-9_]+)\]$`)
)

func (g *schemaGen) typeName(t reflect.Type) string {
	if n, ok := g.names[t]; ok {
		return n
	}
	n := t.Name()
	if m := genericArg.FindStringSubmatch(n); m != nil {
		n = n[:strings.IndexByte(n, '[')] + "Of" + m[1]
	}
	if t.PkgPath() != "" && !strings.HasSuffix(t.PkgPath(), "/api") {
		// A type of another package: prefix its package to keep names apart.
		n = t.PkgPath()[strings.LastIndexByte(t.PkgPath(), '/')+1:] + "." + n
	}
	g.names[t] = n
	return n
}

func (g *schemaGen) schema(t reflect.Type) map[string]any {
	switch t {
	case durationType:
		return map[string]any{"type": []string{"string", "number"}, "description": "a duration: \"1s\", \"250ms\", \"2m\", or a number of milliseconds", "examples": []any{"1s"}}
	case rawType:
		return map[string]any{}
	case timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	}
	if t.Kind() != reflect.Struct && t.Implements(textMarshalerType) {
		return map[string]any{"type": "string"} // an enum written by name (config.Guarantee)
	}
	switch t.Kind() {
	case reflect.Pointer:
		return g.schema(t.Elem())
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		s := map[string]any{"type": "integer"}
		if t.Kind() >= reflect.Uint {
			s["minimum"] = 0
		}
		return s
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"type": "string", "contentEncoding": "base64"}
		}
		return map[string]any{"type": "array", "items": g.schema(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": g.schema(t.Elem())}
	case reflect.Struct:
		name := g.typeName(t)
		if _, done := g.components[name]; !done {
			g.components[name] = nil // mark before recursing (self-referencing types)
			g.components[name] = g.object(t)
		}
		return map[string]any{"$ref": "#/components/schemas/" + name}
	}
	return map[string]any{}
}

func (g *schemaGen) object(t reflect.Type) map[string]any {
	props := map[string]any{}
	var required []string
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if f.Anonymous && f.Type.Kind() == reflect.Struct {
				walk(f.Type)
				continue
			}
			if !f.IsExported() {
				continue
			}
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			if name == "" {
				name = f.Name
			}
			s := g.schema(f.Type)
			if d := f.Tag.Get("doc"); d != "" {
				if _, isRef := s["$ref"]; isRef {
					s = map[string]any{"allOf": []any{s}, "description": d}
				} else {
					s["description"] = d
				}
			}
			props[name] = s
			if !strings.Contains(opts, "omitempty") && f.Type.Kind() != reflect.Pointer {
				required = append(required, name)
			}
		}
	}
	walk(t)
	out := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		out["required"] = required
	}
	return out
}

var pathParam = regexp.MustCompile(`\{([A-Za-z0-9_]+)\}`)

// openAPI builds the document.
func (s *Server) openAPI() map[string]any {
	g := &schemaGen{components: map[string]any{}, names: map[reflect.Type]string{}}
	problem := g.schema(reflect.TypeOf(Problem{}))
	paths := map[string]any{}
	for _, rt := range s.routes {
		op := map[string]any{"operationId": rt.id, "summary": rt.summary, "tags": []string{rt.tag}}
		var params []any
		for _, m := range pathParam.FindAllStringSubmatch(rt.path, -1) {
			params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
		}
		for _, q := range rt.query {
			params = append(params, map[string]any{"name": q.name, "in": "query", "description": q.desc, "schema": map[string]any{"type": q.schema}})
		}
		if len(params) > 0 {
			op["parameters"] = params
		}
		if rt.request != nil {
			op["requestBody"] = map[string]any{"required": true, "content": map[string]any{
				"application/json": map[string]any{"schema": g.schema(reflect.TypeOf(rt.request))}}}
		}
		status := rt.status
		if status == 0 {
			status = http.StatusOK
		}
		ok := map[string]any{"description": http.StatusText(status)}
		if rt.response != nil {
			ct := rt.contentType
			if ct == "" {
				ct = "application/json"
			}
			var sch map[string]any
			if ct == "application/json" {
				sch = g.schema(reflect.TypeOf(rt.response))
			} else {
				sch = map[string]any{"type": "string"}
			}
			ok["content"] = map[string]any{ct: map[string]any{"schema": sch}}
		}
		responses := map[string]any{strconv.Itoa(status): ok}
		codes := append([]int(nil), rt.problems...)
		if rt.role != RolePublic {
			codes = append(codes, http.StatusUnauthorized, http.StatusForbidden)
			op["security"] = []any{map[string]any{"bearer": []string{}}, map[string]any{"apiKey": []string{}}}
			op["x-uagate-role"] = rt.role.String()
		}
		for _, c := range codes {
			responses[strconv.Itoa(c)] = map[string]any{"description": http.StatusText(c),
				"content": map[string]any{"application/problem+json": map[string]any{"schema": problem}}}
		}
		op["responses"] = responses
		item, _ := paths[rt.path].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[rt.path] = item
		}
		item[strings.ToLower(rt.method)] = op
	}
	return map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":   "uagate gateway API",
			"version": s.opts.Version,
			"description": "REST API of the uagate OPC UA → PubSub/JSON gateway: endpoints and sessions, writer groups, " +
				"dataset writers and fields, last values, on-demand OPC UA services, certificates, and the OPC Publisher " +
				"configuration API. Errors are RFC 9457 problem details (application/problem+json). Lists are paged " +
				"with limit and cursor.",
		},
		"paths": paths,
		"components": map[string]any{
			"schemas": g.components,
			"securitySchemes": map[string]any{
				"bearer": map[string]any{"type": "http", "scheme": "bearer", "description": "an API key as bearer token"},
				"apiKey": map[string]any{"type": "apiKey", "in": "header", "name": "X-API-Key"},
			},
		},
	}
}
