package main

import (
	"context"
	"fmt"
)

func runList(ctx context.Context, e *env, args []string) int   { return notYet(e) }
func runShow(ctx context.Context, e *env, args []string) int   { return notYet(e) }
func runExport(ctx context.Context, e *env, args []string) int { return notYet(e) }
func runStats(ctx context.Context, e *env, args []string) int  { return notYet(e) }

func notYet(e *env) int { fmt.Fprintln(e.stderr, "not yet"); return exitUnavailable }
