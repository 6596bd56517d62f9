package gateway

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/uagate/gateway/bridge/config"
)

// Reload by difference. An apply computes the difference between the
// running configuration and the next one, does the OPC UA work (subscriptions
// deleted and created, writers changed in place) without gw.mu, and swaps
// the result in. It is all-or-nothing per writer group: a group whose change
// fails keeps running as it was (or, new, stays absent), and the running
// configuration says so; the report names what was applied and what failed.
// What fails is retried by Retry, or by the next apply of a configuration
// that still asks for it (the file watcher's next event, a re-save).

// ErrNeedsRestart marks a change the running gateway cannot apply in place:
// gateway, embedded, http or sink settings.
var ErrNeedsRestart = errors.New("needs a restart")

// ErrStopped is returned by an apply after Stop began.
var ErrStopped = errors.New("gateway: stopped")

// Report says what an apply did.
type Report struct {
	// Changes is the difference between the running configuration and the
	// one asked for.
	Changes config.Changes
	// Applied lists the writer groups whose change took effect (added,
	// removed, recreated or changed in place), in name order.
	Applied []string
	// Failed lists the writer groups whose change did not: each keeps its
	// previous configuration (a new one stays absent).
	Failed []GroupFailure
	// At is when the apply ended.
	At time.Time
}

// GroupFailure is a writer group whose change could not be applied.
type GroupFailure struct {
	Group string
	Err   error
}

// Err returns the failures as one error (nil when everything was applied).
func (r Report) Err() error {
	if len(r.Failed) == 0 {
		return nil
	}
	errs := make([]error, len(r.Failed))
	for i, f := range r.Failed {
		errs[i] = fmt.Errorf("writer group %s not changed: %w", f.Group, f.Err)
	}
	return errors.Join(errs...)
}

// acquireApply waits for the applies ahead (API, watcher, retry) within ctx.
func (gw *Gateway) acquireApply(ctx context.Context) error {
	select {
	case gw.applySem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("gateway: waiting for an apply in progress: %w", ctx.Err())
	case <-gw.ctx.Done():
		return ErrStopped
	}
}

func (gw *Gateway) releaseApply() { <-gw.applySem }

// Apply makes next (defaults applied, validated) the running configuration:
// writer groups added, removed, or recreated when their own settings or
// endpoint changed; writers added, removed or replaced in place. A change
// of gateway settings, embedded parts or sinks is refused as a whole with
// ErrNeedsRestart. Apply works on a copy of next with its defaults
// applied, which must validate; the caller keeps next. The error is the
// report's: nil when everything applied.
func (gw *Gateway) Apply(ctx context.Context, next *config.Config) (Report, error) {
	next = next.Clone()
	next.ApplyDefaults()
	if err := next.Validate(); err != nil {
		return Report{}, err
	}
	if err := gw.acquireApply(ctx); err != nil {
		return Report{}, err
	}
	defer gw.releaseApply()
	return gw.applyHeld(ctx, next)
}

// Retry applies again the configuration last asked for: the writer groups
// whose change failed are tried again (a certificate store fixed, a server
// back).
func (gw *Gateway) Retry(ctx context.Context) (Report, error) {
	if err := gw.acquireApply(ctx); err != nil {
		return Report{}, err
	}
	defer gw.releaseApply()
	gw.mu.Lock()
	next := gw.desired
	gw.mu.Unlock()
	return gw.applyHeld(ctx, next)
}

// LastReport returns the report of the last apply (zero before one).
func (gw *Gateway) LastReport() Report {
	gw.mu.Lock()
	defer gw.mu.Unlock()
	return gw.report
}

// Pending reports whether the configuration last asked for differs from the
// running one (a part of it failed and waits for a retry).
func (gw *Gateway) Pending() bool {
	gw.mu.Lock()
	defer gw.mu.Unlock()
	// The last apply's failed groups are exactly what differs: the others
	// run as asked.
	return len(gw.report.Failed) > 0
}

// applyHeld is Apply with gw.applySem held.
func (gw *Gateway) applyHeld(ctx context.Context, next *config.Config) (Report, error) {
	gw.mu.Lock()
	if gw.stopped {
		gw.mu.Unlock()
		return Report{}, ErrStopped
	}
	old := gw.cfg
	gw.mu.Unlock()
	ch := config.Diff(old, next)
	rep := Report{Changes: ch}
	if ch.Settings || !ch.Sinks.Empty() {
		return rep, fmt.Errorf("%w: the change touches gateway, embedded, http or sink settings:\n%s", ErrNeedsRestart, ch.String())
	}
	gw.mu.Lock()
	gw.desired = next
	gw.mu.Unlock()
	if ch.Empty() {
		rep.At = time.Now()
		gw.mu.Lock()
		gw.report = rep
		gw.mu.Unlock()
		return rep, nil
	}
	// Writer groups to recreate: changed ones, and those of changed endpoints.
	recreate := map[string]bool{}
	for _, n := range ch.WriterGroups.Changed {
		recreate[n] = true
	}
	for _, e := range ch.Endpoints.Changed {
		for _, wg := range next.WriterGroups {
			if wg.Endpoint == e && findGroup(old, wg.Name) != nil {
				recreate[wg.Name] = true
			}
		}
	}
	added := map[string]bool{}
	for _, n := range ch.WriterGroups.Added {
		added[n] = true
	}
	failed := map[string]error{}
	applied := map[string]bool{}
	// The endpoint's client configuration (its certificate store) first:
	// a group whose new endpoint cannot be used keeps running as it was.
	for _, n := range slices.Sorted(maps.Keys(mergeSets(recreate, added))) {
		if _, err := gw.clientConfig(next, findGroup(next, n).Endpoint); err != nil {
			failed[n] = err
		}
	}
	for _, n := range ch.WriterGroups.Removed {
		gw.removeGroup(ctx, n)
		applied[n] = true
	}
	for n := range recreate {
		if failed[n] == nil {
			gw.removeGroup(ctx, n)
		}
	}
	for _, n := range slices.Sorted(maps.Keys(mergeSets(recreate, added))) {
		if failed[n] != nil {
			continue
		}
		applied[n] = true
		if gw.scale != nil && !gw.scale.Holds(n) {
			continue // its holder (another replica, or this one once it takes the lease) starts it
		}
		if err := gw.startGroup(next, n); err != nil {
			failed[n] = err
			delete(applied, n)
			if recreate[n] {
				// The old version was stopped already: bring it back.
				if err := gw.startGroup(old, n); err != nil {
					gw.log.Error("writer group could not be brought back as it was", "group", n, "err", err)
				}
			}
		}
	}
	// Writers of groups that go on: in place.
	touched := map[string][]string{}
	for _, list := range [][]string{ch.Writers.Added, ch.Writers.Removed, ch.Writers.Changed, ch.Fields.Added, ch.Fields.Removed, ch.Fields.Changed} {
		for _, n := range list {
			parts := strings.SplitN(n, "/", 3)
			if len(parts) >= 2 && !recreate[parts[0]] && !added[parts[0]] && !slices.Contains(touched[parts[0]], parts[1]) {
				touched[parts[0]] = append(touched[parts[0]], parts[1])
			}
		}
	}
	for _, gname := range slices.Sorted(maps.Keys(touched)) {
		gw.mu.Lock()
		rg := gw.groups[gname]
		gw.mu.Unlock()
		if rg == nil {
			applied[gname] = true // not running here (scale-out): its holder builds it from the new configuration
			continue
		}
		if rg.g.Load() == nil {
			// Still expanding its browse selections from the old
			// configuration: build it again from the new one.
			gw.removeGroup(ctx, gname)
			if err := gw.startGroup(next, gname); err != nil {
				failed[gname] = err
				if err := gw.startGroup(old, gname); err != nil {
					gw.log.Error("writer group could not be brought back as it was", "group", gname, "err", err)
				}
				continue
			}
			applied[gname] = true
			continue
		}
		if err := gw.changeWriters(ctx, rg, old, next, gname, touched[gname]); err != nil {
			failed[gname] = err
			// Half a change is not what either configuration says: run
			// the group as it was.
			gw.removeGroup(ctx, gname)
			if err := gw.startGroup(old, gname); err != nil {
				gw.log.Error("writer group could not be brought back as it was", "group", gname, "err", err)
			}
			continue
		}
		applied[gname] = true
	}
	eff := effective(old, next, failed)
	gw.mu.Lock()
	gw.cfg = eff
	for name := range gw.clients {
		if endpointOf(eff, name) == nil {
			delete(gw.clients, name)
		}
	}
	rep.Applied = slices.Sorted(maps.Keys(applied))
	for _, n := range slices.Sorted(maps.Keys(failed)) {
		rep.Failed = append(rep.Failed, GroupFailure{Group: n, Err: failed[n]})
	}
	rep.At = time.Now()
	gw.report = rep
	gw.publishLocked()
	gw.mu.Unlock()
	if gw.scale != nil {
		gw.scale.SetUnits(groupNames(eff))
	}
	return rep, rep.Err()
}

// startGroup starts writer group name of cfg.
func (gw *Gateway) startGroup(cfg *config.Config, name string) error {
	wg := findGroup(cfg, name)
	if wg == nil {
		return nil
	}
	ccfg, err := gw.clientConfig(cfg, wg.Endpoint)
	if err != nil {
		return err
	}
	return gw.addGroup(cfg, wg, ccfg)
}

// changeWriters applies the changes of the writers named in a running
// group: removals first, then replacements, then additions (a writer added
// may take the DataSetWriterId, by default its position, of one removed).
func (gw *Gateway) changeWriters(ctx context.Context, rg *runGroup, old, next *config.Config, gname string, writers []string) error {
	g := rg.g.Load()
	defer gw.refreshSparkplug()
	slices.Sort(writers)
	for pass := 0; pass < 3; pass++ {
		for _, wname := range writers {
			nw := findWriter(next, gname, wname)
			ow := findWriter(old, gname, wname)
			var err error
			switch {
			case nw == nil && pass == 0:
				err = g.RemoveWriter(ctx, wname)
			case nw != nil && ow != nil && pass == 1:
				err = g.ReplaceWriter(ctx, *nw)
			case ow == nil && pass == 2:
				err = g.AddWriter(ctx, *nw)
			}
			if err != nil {
				return fmt.Errorf("writer %s/%s: %w", gname, wname, err)
			}
		}
	}
	return nil
}

// effective is next with the writer groups that failed as they are in old
// (absent there: absent), and the endpoints only failed groups asked to
// change as they are in old.
func effective(old, next *config.Config, failed map[string]error) *config.Config {
	if len(failed) == 0 {
		return next
	}
	eff := next.Clone()
	eff.WriterGroups = eff.WriterGroups[:0]
	for _, wg := range next.WriterGroups {
		if failed[wg.Name] == nil {
			eff.WriterGroups = append(eff.WriterGroups, wg)
		} else if o := findGroup(old, wg.Name); o != nil {
			eff.WriterGroups = append(eff.WriterGroups, *o)
		}
	}
	eff = eff.Clone() // the groups above share slices with next and old
	// An endpoint whose change only failed groups asked for stays as it was.
	for i := 0; i < len(eff.Endpoints); i++ {
		ep := eff.Endpoints[i]
		wanted := false
		for _, wg := range next.WriterGroups {
			if wg.Endpoint == ep.Name && failed[wg.Name] == nil {
				wanted = true
			}
		}
		failedOnly := false
		for _, wg := range next.WriterGroups {
			if wg.Endpoint == ep.Name && failed[wg.Name] != nil {
				failedOnly = true
			}
		}
		if wanted || !failedOnly {
			continue
		}
		if o := endpointOf(old, ep.Name); o != nil {
			eff.Endpoints[i] = *o
			continue
		}
		eff.Endpoints = slices.Delete(eff.Endpoints, i, i+1)
		i--
	}
	// A group kept as it was keeps its endpoint, even one next removed.
	for _, wg := range eff.WriterGroups {
		if endpointOf(eff, wg.Endpoint) == nil {
			if o := endpointOf(old, wg.Endpoint); o != nil {
				eff.Endpoints = append(eff.Endpoints, *o)
			}
		}
	}
	return eff.Clone()
}

func mergeSets(a, b map[string]bool) map[string]bool {
	out := maps.Clone(a)
	maps.Copy(out, b)
	return out
}

func findGroup(c *config.Config, name string) *config.WriterGroup {
	for i := range c.WriterGroups {
		if c.WriterGroups[i].Name == name {
			return &c.WriterGroups[i]
		}
	}
	return nil
}

func findWriter(c *config.Config, group, writer string) *config.DataSetWriter {
	wg := findGroup(c, group)
	if wg == nil {
		return nil
	}
	for j := range wg.Writers {
		if wg.Writers[j].Name == writer {
			return &wg.Writers[j]
		}
	}
	return nil
}

// Watch applies the changes of the configuration file at path until ctx
// ends (config.Watch): a valid change is applied by difference, an invalid
// file is refused and logged, and a change applied only in part is applied
// again at the file's next event (a re-save of the same content included).
// Load the file and start the gateway with it first: its content then is
// the reference.
func (gw *Gateway) Watch(ctx context.Context, path string) error {
	_, err := config.Watch(ctx, path, func(next *config.Config, warns []config.Warning) error {
		for _, w := range warns {
			gw.log.Warn("configuration: " + w.String())
		}
		if config.Diff(gw.Config(), next).Empty() {
			// What runs already (the API saved it): an API change that
			// failed in part stays pending for Retry.
			return nil
		}
		rep, err := gw.Apply(ctx, next)
		switch {
		case err != nil && len(rep.Applied) > 0:
			gw.log.Error("configuration change applied in part; saving the file again retries the rest", "file", path,
				"applied", strings.Join(rep.Applied, ","), "err", err)
		case err != nil:
			gw.log.Error("configuration change not applied", "file", path, "err", err)
		case !rep.Changes.Empty():
			gw.log.Info("configuration change applied", "file", path, "changes", strings.TrimSpace(rep.Changes.String()))
		}
		return err
	}, func(err error) {
		gw.log.Error("configuration change refused; the running configuration stays", "file", path, "err", err)
	})
	return err
}
