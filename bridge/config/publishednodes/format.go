package publishednodes

import (
	"strconv"

	"github.com/uagate/gateway/bridge/config"
)

func init() {
	config.RegisterFormat(config.Format{Name: "OPC Publisher's publishednodes.json", Detect: IsFile, Decode: decodeFile})
}

// decodeFile is the Format's Decode: the file's entries resolved and
// published in order into c, each issue at its line.
func decodeFile(data []byte, file string, c *config.Config) config.Decoded {
	entries, d := parseFile(data, file)
	origins := map[string]config.Position{}
	for i := range entries {
		p := "[" + strconv.Itoa(i) + "]"
		r, errs, warns := Resolve(&entries[i])
		d.add(&d.errs, p, errs)
		d.add(&d.warns, p, warns)
		if len(errs) > 0 {
			continue
		}
		placed := func(path string, node int) {
			at := p
			if node >= 0 {
				at += "." + r.Nodes[node].Path
			}
			origins[path] = d.locate(at, false)
		}
		d.add(&d.warns, p, publish(c, r, placed))
	}
	return config.Decoded{Errors: d.errs, Warnings: d.warns, Origins: origins}
}

// add reports the issues of the entry at path p.
func (d *fileDecoder) add(list *[]config.Issue, p string, issues []Issue) {
	for _, is := range issues {
		path := p
		if is.Path != "" {
			path += "." + is.Path
		}
		at := path
		if is.at != "" {
			at = p + "." + is.at
		}
		d.issue(list, d.locate(at, is.AtKey), path, "%s", is.Message)
	}
}
