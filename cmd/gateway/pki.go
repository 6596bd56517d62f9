package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"

	"github.com/uagate/gateway/uastack/pki"
)

// cmdPKI manages the certificate store: list its certificates, trust a rejected
// one (the command the store's refusal message names).
func cmdPKI(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pki", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("pki", defaultPKIDir(), "certificate store `dir`ectory; default the one `gateway run` uses (<stateDir>/pki, $UAGATE_STATE_DIR)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: gateway pki [-pki dir] list\n       gateway pki [-pki dir] trust <thumbprint>\n\nFlags:\n")
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return errFlagParse(err)
	}
	if len(pos) == 0 {
		fs.Usage()
		return fmt.Errorf("%w: pki needs a command: list or trust", errUsage)
	}
	store, err := pki.Open(*dir, pki.Options{Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return err
	}
	switch pos[0] {
	case "list":
		if len(pos) != 1 {
			return fmt.Errorf("%w: pki list takes no arguments", errUsage)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "FOLDER\tTHUMBPRINT\tSUBJECT\tAPPLICATION URI\tVALID UNTIL")
		for _, f := range []pki.Folder{pki.FolderOwn, pki.FolderTrusted, pki.FolderIssuers, pki.FolderRejected} {
			certs, err := store.List(f)
			if err != nil {
				return err
			}
			for _, c := range certs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", f, c.Thumbprint, c.Cert.Subject.CommonName, pki.ApplicationURI(c.Cert), c.Cert.NotAfter.UTC().Format("2006-01-02"))
			}
		}
		return tw.Flush()
	case "trust":
		if len(pos) != 2 {
			return fmt.Errorf("%w: pki trust needs the thumbprint of a certificate in rejected/certs", errUsage)
		}
		p, err := store.TrustRejected(pos[1])
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, "trusted:", p)
		return nil
	}
	return fmt.Errorf("%w: unknown pki command %q (want list or trust)", errUsage, pos[0])
}
