package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mcp-confirm/mcp-confirm/hostconfig"
)

type uninstallFlags struct {
	hosts  []string
	force  bool
	dryRun bool
}

func (c *cli) uninstallCommand() *cobra.Command {
	var f uninstallFlags
	cmd := c.leaf(&cobra.Command{
		Use:   "uninstall [--host NAME] [--force] [--dry-run]",
		Short: "put back the host config files mcp-confirm init changed, byte for byte",
		Long: `Restore each config file 'mcp-confirm init' changed from the backup it kept
(of every host, or those named with --host), showing the diff first. A file
changed since init is refused, with the diff of that change, so that it is
not lost: undo the change, or give --force to restore the backup anyway.
Nothing is restored if any file is refused.`,
		Example: `  mcp-confirm uninstall --dry-run
  mcp-confirm uninstall --host cursor
  mcp-confirm uninstall --host claude-code --force`,
	}, "serve", nil, func(pos []string) int { return runUninstall(c.env, f, pos) })
	fl := cmd.Flags()
	fl.StringSliceVar(&f.hosts, "host", nil, "only these host(s): "+strings.Join(hostconfig.HostNames(), ", "))
	fl.BoolVar(&f.force, "force", false, "restore files changed since init too (their changes are lost)")
	fl.BoolVar(&f.dryRun, "dry-run", false, "show what would be restored; write nothing")
	cmd.RegisterFlagCompletionFunc("host", hostCompletion)
	cmd.ValidArgsFunction = cobra.NoFileCompletions
	return cmd
}

func runUninstall(e *env, f uninstallFlags, pos []string) int {
	if len(pos) > 0 {
		return (&cli{env: e}).unexpected("uninstall", pos[0], "Name hosts with --host, e.g. mcp-confirm uninstall --host cursor.")
	}
	hosts, code := lookupHosts(e, "uninstall", f.hosts)
	if code != exitOK {
		return code
	}
	store, code := initStore(e, "uninstall")
	if code != exitOK {
		return code
	}
	var restores []hostconfig.Restore
	names := []string{""}
	if len(hosts) > 0 {
		names = names[:0]
		for _, h := range hosts {
			names = append(names, h.Name)
		}
	}
	for _, n := range names {
		rs, err := store.Restores(n)
		if err != nil {
			fmt.Fprintf(e.stderr, "mcp-confirm uninstall: %v\nThe backups are in %s; nothing was changed.\n", err, store.Dir)
			return exitUnavailable
		}
		restores = append(restores, rs...)
	}
	if len(restores) == 0 {
		which := "any host"
		if len(hosts) > 0 {
			which = strings.Join(names, ", ")
		}
		fmt.Fprintf(e.stdout, "Nothing to undo: mcp-confirm init has changed no config file of %s.\n", which)
		return exitOK
	}

	refused := 0
	for _, r := range restores {
		path := r.Backup.Path
		switch r.State {
		case hostconfig.AsInit, hostconfig.AsOriginal:
		case hostconfig.EditedSince:
			if f.force {
				continue
			}
			refused++
			fmt.Fprintf(e.stdout, "%s: %s changed since init:\n", r.Backup.Host, path)
			fmt.Fprint(e.stdout, hostconfig.Diff(path, "now", r.Backup.Written, r.Current))
			fmt.Fprintf(e.stderr, "mcp-confirm uninstall: %s changed since mcp-confirm init wrote it (the diff is above); restoring the backup would lose that change\n"+
				"Undo the change, or give --force to restore the file as it was before init anyway; nothing was restored.\n", path)
		case hostconfig.Gone:
			if f.force {
				continue
			}
			refused++
			fmt.Fprintf(e.stderr, "mcp-confirm uninstall: %s was removed since mcp-confirm init wrote it\n"+
				"Give --force to write it back as it was before init, from %s; nothing was restored.\n", path, r.Backup.OriginalPath())
		}
	}
	if refused > 0 {
		return exitBadInput
	}

	for _, r := range restores {
		path := r.Backup.Path
		if r.State == hostconfig.AsOriginal {
			fmt.Fprintf(e.stdout, "%s: %s is already as it was before init\n", r.Backup.Host, path)
		} else {
			fmt.Fprintf(e.stdout, "%s: %s\n", r.Backup.Host, path)
			fmt.Fprint(e.stdout, hostconfig.Diff(path, "after mcp-confirm uninstall", r.Current, r.Backup.Original))
		}
		if f.dryRun {
			continue
		}
		if err := store.Undo(r, f.force); err != nil {
			if errors.Is(err, hostconfig.ErrEditedSince) {
				err = fmt.Errorf("%s: %w", path, err)
			}
			return writeFailed(e, "uninstall", err, "this file was not restored")
		}
		fmt.Fprintf(e.stdout, "restored %s\n", path)
	}
	if f.dryRun {
		fmt.Fprintf(e.stdout, "Dry run: %d file(s) would be restored. Nothing written.\n", len(restores))
		return exitOK
	}
	fmt.Fprintf(e.stdout, "%d file(s) as before mcp-confirm init. Restart the host to use them.\n", len(restores))
	return exitOK
}
