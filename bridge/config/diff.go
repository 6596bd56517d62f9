package config

import (
	"reflect"
	"strings"
)

// Change lists names added, removed and changed, each in the order of the
// configuration they come from (removed: the old one).
type Change struct {
	Added, Removed, Changed []string
}

// Empty reports whether nothing is listed.
func (c Change) Empty() bool { return len(c.Added)+len(c.Removed)+len(c.Changed) == 0 }

// Changes is what a reload has to apply to go from one configuration to the
// next. Each part is listed at the highest level that changed: the writers of
// an added or removed writer group are not listed again under Writers, nor
// the fields of an added or removed writer under Fields. A writer group is
// changed when a setting of its own changed (not its writers'); a writer when
// its id, browse selections or the order of its fields changed; a field when
// any of its settings did. What depends on a changed endpoint (its writer
// groups) is for the caller to recreate.
type Changes struct {
	// Settings: gateway, embedded, http or scaleOut changed, which the running process
	// cannot apply part by part (a restart does).
	Settings bool
	// Commands: the commands section changed; its rules and limits are
	// applied while running (its transports' topics and sinks need a
	// restart: Settings).
	Commands bool
	// Endpoints and Sinks by name; WriterGroups by name; Writers as
	// "group/writer"; Fields as "group/writer/field".
	Endpoints, WriterGroups, Writers, Fields, Sinks Change
}

// Empty reports whether the configurations are the same.
func (c Changes) Empty() bool {
	return !c.Settings && !c.Commands && c.Endpoints.Empty() && c.WriterGroups.Empty() && c.Writers.Empty() && c.Fields.Empty() && c.Sinks.Empty()
}

// String lists the changes, one kind per line ("writers: +line1/new ~line1/a -line1/old").
func (c Changes) String() string {
	var b strings.Builder
	if c.Settings {
		b.WriteString("settings: changed\n")
	}
	if c.Commands {
		b.WriteString("commands: changed\n")
	}
	for _, part := range []struct {
		name string
		ch   Change
	}{{"endpoints", c.Endpoints}, {"writer groups", c.WriterGroups}, {"writers", c.Writers}, {"fields", c.Fields}, {"sinks", c.Sinks}} {
		if part.ch.Empty() {
			continue
		}
		b.WriteString(part.name + ":")
		for _, n := range part.ch.Added {
			b.WriteString(" +" + n)
		}
		for _, n := range part.ch.Changed {
			b.WriteString(" ~" + n)
		}
		for _, n := range part.ch.Removed {
			b.WriteString(" -" + n)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// Diff compares two configurations (both with defaults applied, as Load
// returns them) by name. A nil configuration is an empty one.
func Diff(old, new *Config) Changes {
	if old == nil {
		old = &Config{}
	}
	if new == nil {
		new = &Config{}
	}
	var ch Changes
	ch.Settings = !reflect.DeepEqual(old.Gateway, new.Gateway) || !reflect.DeepEqual(old.Embedded, new.Embedded) || !reflect.DeepEqual(old.HTTP, new.HTTP) ||
		!reflect.DeepEqual(old.ScaleOut, new.ScaleOut) || commandTransportsChanged(&old.Commands, &new.Commands)
	ch.Commands = !reflect.DeepEqual(old.Commands, new.Commands)
	ch.Endpoints = diffNamed(old.Endpoints, new.Endpoints, func(e Endpoint) string { return e.Name }, deepEqual[Endpoint])

	oldGroups, newGroups := old.WriterGroups, new.WriterGroups
	ch.WriterGroups = diffNamed(oldGroups, newGroups, func(g WriterGroup) string { return g.Name }, func(a, b WriterGroup) bool {
		a.Writers, b.Writers = nil, nil
		return reflect.DeepEqual(a, b)
	})
	for _, ng := range newGroups {
		og, ok := find(oldGroups, ng.Name, func(g WriterGroup) string { return g.Name })
		if !ok {
			continue // added: its writers with it
		}
		prefix := ng.Name + "/"
		wc := diffNamed(og.Writers, ng.Writers, func(w DataSetWriter) string { return w.Name }, func(a, b DataSetWriter) bool {
			if !sameFieldOrder(a.Fields, b.Fields) {
				return false
			}
			a.Fields, b.Fields = nil, nil
			return reflect.DeepEqual(a, b)
		})
		ch.Writers.add(wc, prefix)
		for _, nw := range ng.Writers {
			ow, ok := find(og.Writers, nw.Name, func(w DataSetWriter) string { return w.Name })
			if !ok {
				continue
			}
			fc := diffNamed(ow.Fields, nw.Fields, func(f Field) string { return f.Name }, deepEqual[Field])
			ch.Fields.add(fc, prefix+nw.Name+"/")
		}
	}

	ch.Sinks = diffNamed(sinkList(old), sinkList(new), func(s namedSink) string { return s.name }, func(a, b namedSink) bool {
		return reflect.DeepEqual(a.value, b.value)
	})
	return ch
}

func (c *Change) add(o Change, prefix string) {
	for _, n := range o.Added {
		c.Added = append(c.Added, prefix+n)
	}
	for _, n := range o.Removed {
		c.Removed = append(c.Removed, prefix+n)
	}
	for _, n := range o.Changed {
		c.Changed = append(c.Changed, prefix+n)
	}
}

func sameFieldOrder(a, b []Field) bool {
	// Only the relative order of the fields both have: added and removed
	// fields are listed as such.
	inB := map[string]int{}
	for i, f := range b {
		inB[f.Name] = i
	}
	last := -1
	for _, f := range a {
		i, ok := inB[f.Name]
		if !ok {
			continue
		}
		if i < last {
			return false
		}
		last = i
	}
	return true
}

func find[T any](list []T, name string, nameOf func(T) string) (T, bool) {
	for _, x := range list {
		if nameOf(x) == name {
			return x, true
		}
	}
	var zero T
	return zero, false
}

func diffNamed[T any](old, new []T, nameOf func(T) string, equal func(a, b T) bool) Change {
	var ch Change
	for _, n := range new {
		o, ok := find(old, nameOf(n), nameOf)
		switch {
		case !ok:
			ch.Added = append(ch.Added, nameOf(n))
		case !equal(o, n):
			ch.Changed = append(ch.Changed, nameOf(n))
		}
	}
	for _, o := range old {
		if _, ok := find(new, nameOf(o), nameOf); !ok {
			ch.Removed = append(ch.Removed, nameOf(o))
		}
	}
	return ch
}

// namedSink is a sink of any kind, for diffing by name.
type namedSink struct {
	name  string
	value any
}

func sinkList(c *Config) []namedSink {
	var out []namedSink
	for _, s := range c.Sinks.MQTT {
		out = append(out, namedSink{s.Name, s})
	}
	for _, s := range c.Sinks.NATS {
		out = append(out, namedSink{s.Name, s})
	}
	for _, s := range c.Sinks.File {
		out = append(out, namedSink{s.Name, s})
	}
	if ws := c.Sinks.WebSocket; ws != nil {
		out = append(out, namedSink{"websocket", *ws})
	}
	return out
}

func deepEqual[T any](a, b T) bool { return reflect.DeepEqual(a, b) }

// commandTransportsChanged reports a change of what the command transports
// listen on, which a restart applies.
func commandTransportsChanged(a, b *Commands) bool {
	return a.On() != b.On() || a.Topic != b.Topic || a.Subject != b.Subject ||
		!reflect.DeepEqual(a.Sinks, b.Sinks) || !reflect.DeepEqual(a.WebSocket, b.WebSocket) ||
		a.Workers != b.Workers || a.QueueSize != b.QueueSize
}
