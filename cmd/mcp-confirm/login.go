package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/termtext"
	"github.com/mcp-confirm/mcp-confirm/tui"
)

// defaultLoginWait is how long login waits for the browser step.
const defaultLoginWait = 5 * time.Minute

func (c *cli) loginCommand() *cobra.Command {
	var wait time.Duration
	var scopes []string
	var client clientFlags
	cmd := c.leaf(&cobra.Command{
		Use:   "login --url URL [--wait D] [--scope S] [--client-id ID [--client-secret S] [--callback-port N]]",
		Short: "log in to a remote server with OAuth; its token is then used and refreshed",
		Long: `login does the OAuth 2.1 login of the MCP authorization spec for the remote
server at --url: it finds the server's authorization server (protected-resource
metadata), registers mcp-confirm with it, and prints the authorization URL to
open in a browser. When the browser comes back to mcp-confirm's loopback
redirect (127.0.0.1, a free port), the code is exchanged, with PKCE, for
tokens, kept mode 0600 in the state folder, one file per server URL.

call, tools, query, retry, proxy and the console then send the token to that
URL and refresh it when it expires; a --header 'Authorization: ...' wins over it.

An authorization server without dynamic registration takes a client
registered there beforehand: --client-id, --client-secret for a confidential
one (${VAR} is expanded, so the secret need not be typed on the command line),
and --callback-port for the redirect URI it was registered with
(http://127.0.0.1:PORT/callback).

Nothing secret goes over plain http:// except to loopback (127.0.0.0/8, ::1,
localhost), as OAuth 2.1 wants: an http:// --url on another host is refused,
as is an authorization server with such endpoints, and discovery follows no
redirect to another origin.

Exit 0 logged in; 1 not completed (declined, --wait ran out, ctrl-C); 2 bad
input (an http:// --url off loopback included); 5 the server cannot be
reached or offers no OAuth login (or one only over plain http:// or across
origins).`,
		Example: "  mcp-confirm login --url https://orders.example.com/mcp\n" +
			"  mcp-confirm login --url https://orders.example.com/mcp --client-id mcp-confirm --client-secret '${ORDERS_SECRET}' --callback-port 8976",
	}, "serve", []string{"url", "url-env"}, func(pos []string) int { return runLogin(c.ctx, c.env, &c.g, wait, scopes, client, pos) })
	cmd.Flags().DurationVar(&wait, "wait", defaultLoginWait, "how long to wait for the browser step")
	cmd.Flags().StringSliceVar(&scopes, "scope", nil, "OAuth scope to ask for (repeatable; default: what the server's 401 asks for)")
	cmd.Flags().StringVar(&client.id, "client-id", "", "a client registered beforehand with the authorization server (no dynamic registration)")
	cmd.Flags().StringVar(&client.secret, "client-secret", "", "its secret, for a confidential client; ${VAR} expands from the environment")
	cmd.Flags().IntVar(&client.port, "callback-port", 0, "the loopback port of the redirect URI (the one the client was registered with; default: a free port)")
	cmd.ValidArgsFunction = cobra.NoFileCompletions
	return cmd
}

// clientFlags name a client registered beforehand.
type clientFlags struct {
	id, secret string
	port       int
}

// loginStore is this user's stored logins: the oauth folder of the state
// folder ($XDG_STATE_HOME/mcp-confirm/oauth, else
// ~/.local/state/mcp-confirm/oauth), whatever journal is used.
func loginStore(e *env) (*mcpclient.Logins, error) {
	if d := e.getenv("XDG_STATE_HOME"); d != "" {
		return &mcpclient.Logins{Dir: filepath.Join(d, "mcp-confirm", "oauth")}, nil
	}
	home := e.getenv("HOME")
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("no state folder for logins: set $XDG_STATE_HOME or $HOME (%w)", err)
		}
		home = h
	}
	return &mcpclient.Logins{Dir: filepath.Join(home, ".local", "state", "mcp-confirm", "oauth")}, nil
}

// withLogins gives a remote server's choice this user's stored logins; a
// state folder that cannot be found leaves it without (a 401 then says
// how to log in).
func withLogins(e *env, choice *serverChoice) {
	if choice.spec.URL == "" {
		return
	}
	if l, err := loginStore(e); err == nil {
		choice.logins = l
	}
}

func runLogin(ctx context.Context, e *env, g *globalOpts, wait time.Duration, scopes []string, client clientFlags, pos []string) int {
	switch {
	case len(pos) > 0:
		return (&cli{env: e}).unexpected("login", pos[0], "Give the server with --url URL.")
	case g.url == "":
		fmt.Fprintf(e.stderr, "mcp-confirm login: no server given\nGive the remote server's endpoint with --url, e.g. mcp-confirm login --url https://orders.example.com/mcp.\n")
		return exitBadInput
	case wait <= 0:
		fmt.Fprintf(e.stderr, "mcp-confirm login: --wait must be more than 0 (got %s)\nGive how long to wait for the browser, e.g. --wait 5m.\n", wait)
		return exitBadInput
	case client.port < 0 || client.port > 65535:
		fmt.Fprintf(e.stderr, "mcp-confirm login: --callback-port must be from 1 to 65535 (got %d)\nGive the port of the redirect URI the client was registered with.\n", client.port)
		return exitBadInput
	case client.id == "" && client.secret != "":
		fmt.Fprintf(e.stderr, "mcp-confirm login: --client-secret goes with --client-id\nGive the client registered with the authorization server, or leave it out to register one.\n")
		return exitBadInput
	}
	secret, err := mcpclient.ExpandHeader(client.secret)
	if err != nil {
		fmt.Fprintf(e.stderr, "mcp-confirm login: --client-secret: %v\nSet the variable, or give the secret another way; nothing was stored.\n", err)
		return exitBadInput
	}
	if err := checkURL(g.url); err != nil {
		fmt.Fprintf(e.stderr, "mcp-confirm login: %v\nGive the remote server's endpoint, e.g. --url https://orders.example.com/mcp; nothing was stored.\n", err)
		return exitBadInput
	}
	if err := mcpclient.CheckCredentialsURL(g.url, "the login's bearer token"); err != nil {
		fmt.Fprintf(e.stderr, "mcp-confirm login: %v\nNothing was sent or stored.\n", err)
		return exitBadInput
	}
	logins, err := loginStore(e)
	if err != nil {
		fmt.Fprintf(e.stderr, "mcp-confirm login: %v\nNothing was stored.\n", err)
		return exitUnavailable
	}
	said, err := logIn(ctx, logins, g.url, mcpclient.AuthorizeOptions{
		Scopes: scopes, Wait: wait, ClientID: client.id, ClientSecret: secret, CallbackPort: client.port,
		OnAuthorizationURL: func(u string) {
			fmt.Fprintf(e.stderr, "Open this URL in a browser to log in to %s (waiting up to %s; ctrl-C stops):\n", mcpclient.MaskURL(g.url), wait)
			// The URL is the authorization server's metadata with our
			// parameters: a hostile server's control sequences go, as
			// the console's login screen drops them.
			fmt.Fprintln(e.stdout, termtext.Line(u))
		},
	})
	var notKept *loginNotKeptError
	switch {
	case errors.As(err, &notKept):
		fmt.Fprintf(e.stderr, "mcp-confirm login: %v\nThe login worked but could not be kept: check the state folder %s (disk space, permissions).\n", notKept.err, logins.Dir)
		return exitUnavailable
	case err != nil:
		return loginFailed(ctx, e, g.url, err)
	}
	fmt.Fprintf(e.stderr, "mcp-confirm login: %s\n", said)
	return exitOK
}

// logIn is what 'mcp-confirm login' does once its flags are checked, and
// what the console's own login runs (consoleLogin): the OAuth login of the
// server at serverURL (mcpclient.Authorize, which gives the authorization
// URL to o.OnAuthorizationURL), kept in logins, where every session of
// that URL reads it. It returns the line that says so, where it is kept.
func logIn(ctx context.Context, logins *mcpclient.Logins, serverURL string, o mcpclient.AuthorizeOptions) (string, error) {
	login, err := mcpclient.Authorize(ctx, serverURL, o)
	if err != nil {
		return "", err
	}
	if err := logins.Save(login); err != nil {
		return "", &loginNotKeptError{dir: logins.Dir, err: err}
	}
	expiry := "no expiry given"
	if !login.Token.ExpiresAt.IsZero() {
		expiry = "access token valid for " + time.Until(login.Token.ExpiresAt).Round(time.Second).String()
		if login.Token.RefreshToken != "" {
			expiry += ", refreshed when it expires"
		}
	}
	return fmt.Sprintf("logged in to %s (%s); kept in %s", mcpclient.MaskURL(serverURL), expiry, logins.Path(serverURL)), nil
}

// consoleLogin is the console's own login (tui.Options.Login, O on a
// server whose start was refused for want of one): login's, with its
// defaults (dynamic registration, the scope the server asks for, a free
// loopback port), kept where login keeps it. It shows the URL and opens
// no browser, as login. nil when there is no state folder to keep it in.
func consoleLogin(e *env) tui.LoginFunc {
	logins, err := loginStore(e)
	if err != nil {
		return nil
	}
	return func(ctx context.Context, serverURL string, wait time.Duration, show func(string)) (string, error) {
		return logIn(ctx, logins, serverURL, mcpclient.AuthorizeOptions{Wait: wait, OnAuthorizationURL: show})
	}
}

// loginNotKeptError: the login worked, but writing it to the stored
// logins failed; nothing was stored.
type loginNotKeptError struct {
	dir string
	err error
}

func (e *loginNotKeptError) Error() string {
	return fmt.Sprintf("the login worked but could not be kept in %s (disk space, permissions?): %v", e.dir, e.err)
}

func (e *loginNotKeptError) Unwrap() error { return e.err }

// loginFailed says why a login did not happen, in two lines, and gives the
// exit code: 1 not completed (declined, the wait ran out, interrupted), 5
// no OAuth login at that server (or it cannot be reached).
func loginFailed(ctx context.Context, e *env, serverURL string, err error) int {
	msg := termtext.Strip(mcpclient.MaskURLsIn(err.Error())) // it may quote a server's words
	var unreached *url.Error
	switch {
	case ctx.Err() != nil:
		fmt.Fprintf(e.stderr, "mcp-confirm login: interrupted before the browser step was completed\nNothing was stored; run it again to log in.\n")
		return exitFailed
	case errors.Is(err, mcpclient.ErrLoginWait):
		fmt.Fprintf(e.stderr, "mcp-confirm login: %s\nNothing was stored; run it again (a longer --wait gives more time).\n", msg)
		return exitFailed
	case errors.Is(err, mcpclient.ErrLoginDenied):
		fmt.Fprintf(e.stderr, "mcp-confirm login: %s\nNothing was stored.\n", msg)
		return exitFailed
	case errors.Is(err, mcpclient.ErrPlainHTTP):
		fmt.Fprintf(e.stderr, "mcp-confirm login: %s\nNothing was sent to that endpoint, and nothing was stored; the authorization server must serve it over https://.\n", oneLine(msg))
		return exitUnavailable
	case errors.Is(err, mcpclient.ErrNoOAuth):
		fmt.Fprintf(e.stderr, "mcp-confirm login: %s\nCheck --url; a server that wants a token given otherwise takes --header 'Authorization: Bearer ${TOKEN}'. Nothing was stored.\n", oneLine(msg))
		return exitUnavailable
	case errors.As(err, &unreached) && !strings.Contains(msg, "OAuth error"):
		fmt.Fprintf(e.stderr, "mcp-confirm login: %s\nCheck that the server is up and reachable at %s; nothing was stored.\n", oneLine(msg), mcpclient.MaskURL(serverURL))
		return exitUnavailable
	}
	fmt.Fprintf(e.stderr, "mcp-confirm login: %s\nThe authorization server refused; nothing was stored.\n", oneLine(msg))
	return exitFailed
}
