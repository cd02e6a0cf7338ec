package tui

import (
	"github.com/charmbracelet/lipgloss"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// Glyphs. A state is always a glyph and a word, never colour alone, so the
// console reads the same under NO_COLOR, in monochrome goldens and in PNGs.
const (
	GlyphUnknown   = "●"
	GlyphInFlight  = "◌"
	GlyphFailed    = "×"
	GlyphSucceeded = "✓" // the server said it succeeded
	GlyphApplied   = "☑" // an operator (or the query's evidence) marked it done: checked off, not answered
	GlyphAbandoned = "⊘"
	GlyphAll       = "≡"
	GlyphLate      = "⚑" // settled late, not yet acknowledged: always with the word "late"
	GlyphSelected  = "›"
	GlyphPicked    = "◆" // picked for a bulk query (space), beside the cursor's ›
	GlyphRead      = "R"
	GlyphWrite     = "W"
	GlyphKeyTail   = "…"
	GlyphRule      = "─"
	// A bulk query's findings (guard.Finding), each always with its words.
	GlyphFound       = "✓"
	GlyphNotFound    = "○"
	GlyphQueryFailed = "×"
	GlyphNoQuery     = "–"
	BarFull          = "█"
	BarEmpty         = "░"
)

// palette is every colour the console uses: semantic, adaptive to light
// and dark terminals. No colour literal appears outside this block.
var palette = struct {
	Fg, Muted, Faint, Accent, AccentFg, Warn, Bad, Good, Info, SelBg, BarBg, BannerBg lipgloss.AdaptiveColor
}{
	Fg:       lipgloss.AdaptiveColor{Light: "#1F2328", Dark: "#E6EDF3"},
	Muted:    lipgloss.AdaptiveColor{Light: "#57606A", Dark: "#9DA7B3"},
	Faint:    lipgloss.AdaptiveColor{Light: "#8C959F", Dark: "#6E7681"},
	Accent:   lipgloss.AdaptiveColor{Light: "#6639BA", Dark: "#B392F0"},
	AccentFg: lipgloss.AdaptiveColor{Light: "#FFFFFF", Dark: "#1B1530"},
	Warn:     lipgloss.AdaptiveColor{Light: "#9A6700", Dark: "#F2CC60"},
	Bad:      lipgloss.AdaptiveColor{Light: "#CF222E", Dark: "#FF7B72"},
	Good:     lipgloss.AdaptiveColor{Light: "#1A7F37", Dark: "#56D364"},
	Info:     lipgloss.AdaptiveColor{Light: "#0969DA", Dark: "#79C0FF"},
	SelBg:    lipgloss.AdaptiveColor{Light: "#EAE3F7", Dark: "#2D2640"},
	BarBg:    lipgloss.AdaptiveColor{Light: "#EEF1F4", Dark: "#1C2128"},
	BannerBg: lipgloss.AdaptiveColor{Light: "#FFF8C5", Dark: "#3B2F00"},
}

// Styles holds every style of the console, built from one renderer, so a
// test can force a colour profile and production honours NO_COLOR.
type Styles struct {
	r *lipgloss.Renderer

	Title, Subtle, Faint, Bold, Key, Warn, Bad, Good, Info, Accent lipgloss.Style
	TopBar, StatusBar, Banner, Hint, Message, ErrorLine            lipgloss.Style
	Late                                                           lipgloss.Style // the ⚑ late marker and the count of such calls
	Tab                                                            struct{ Active, Inactive lipgloss.Style }
	Row                                                            struct{ Normal, Selected, Header lipgloss.Style }
	State                                                          map[pending.State]lipgloss.Style
	Finding                                                        map[guard.Finding]lipgloss.Style
	Dialog                                                         struct{ Box, Title, Body, Warning, Button, ButtonActive, Input lipgloss.Style }
	Section                                                        lipgloss.Style
	Label                                                          lipgloss.Style
	Badge                                                          struct{ Read, Write, Demo lipgloss.Style }
	BarFull, BarEmpty                                              lipgloss.Style
}

// NewStyles builds the styles on a renderer (lipgloss.DefaultRenderer() in
// production, which honours NO_COLOR through termenv).
func NewStyles(r *lipgloss.Renderer) *Styles {
	if r == nil {
		r = lipgloss.DefaultRenderer()
	}
	s := &Styles{r: r}
	n := r.NewStyle
	s.Title = n().Bold(true).Foreground(palette.Accent)
	s.Subtle = n().Foreground(palette.Muted)
	s.Faint = n().Foreground(palette.Faint)
	s.Bold = n().Bold(true).Foreground(palette.Fg)
	s.Key = n().Bold(true).Foreground(palette.Accent)
	s.Warn = n().Foreground(palette.Warn)
	s.Bad = n().Foreground(palette.Bad)
	s.Good = n().Foreground(palette.Good)
	s.Info = n().Foreground(palette.Info)
	s.Accent = n().Foreground(palette.Accent)
	s.TopBar = n().Foreground(palette.Fg)
	s.StatusBar = n().Foreground(palette.Muted).Background(palette.BarBg)
	s.Banner = n().Foreground(palette.Warn).Background(palette.BannerBg).Bold(true)
	s.Hint = n().Foreground(palette.Info)
	s.Message = n().Foreground(palette.Fg)
	s.ErrorLine = n().Foreground(palette.Bad)
	s.Late = n().Bold(true).Foreground(palette.Warn)
	s.Tab.Active = n().Bold(true).Foreground(palette.AccentFg).Background(palette.Accent)
	s.Tab.Inactive = n().Foreground(palette.Muted)
	s.Row.Normal = n().Foreground(palette.Fg)
	s.Row.Selected = n().Foreground(palette.Fg).Background(palette.SelBg).Bold(true)
	s.Row.Header = n().Foreground(palette.Faint)
	s.State = map[pending.State]lipgloss.Style{
		pending.StateUnknown:   n().Foreground(palette.Warn),
		pending.StateInFlight:  n().Foreground(palette.Info),
		pending.StateFailed:    n().Foreground(palette.Bad),
		pending.StateSucceeded: n().Foreground(palette.Good),
		pending.StateApplied:   n().Foreground(palette.Good),
		pending.StateAbandoned: n().Foreground(palette.Muted),
	}
	s.Finding = map[guard.Finding]lipgloss.Style{
		guard.FindingFound:       n().Foreground(palette.Good),
		guard.FindingNotFound:    n().Foreground(palette.Warn),
		guard.FindingQueryFailed: n().Foreground(palette.Bad),
		guard.FindingNoQuery:     n().Foreground(palette.Muted),
	}
	s.Dialog.Box = n().Border(lipgloss.RoundedBorder()).BorderForeground(palette.Accent).Padding(0, 1)
	s.Dialog.Title = n().Bold(true).Foreground(palette.Accent)
	s.Dialog.Body = n().Foreground(palette.Fg)
	s.Dialog.Warning = n().Foreground(palette.Warn)
	s.Dialog.Button = n().Foreground(palette.Muted).Padding(0, 1)
	s.Dialog.ButtonActive = n().Bold(true).Foreground(palette.AccentFg).Background(palette.Accent).Padding(0, 1)
	s.Dialog.Input = n().Foreground(palette.Fg)
	s.Section = n().Bold(true).Foreground(palette.Accent)
	s.Label = n().Foreground(palette.Muted)
	s.Badge.Read = n().Foreground(palette.Good)
	s.Badge.Write = n().Foreground(palette.Warn)
	s.Badge.Demo = n().Bold(true).Foreground(palette.AccentFg).Background(palette.Accent)
	s.BarFull = n().Foreground(palette.Accent)
	s.BarEmpty = n().Foreground(palette.Faint)
	return s
}

// stateGlyph is the glyph of a state.
func stateGlyph(st pending.State) string {
	switch st {
	case pending.StateUnknown:
		return GlyphUnknown
	case pending.StateInFlight:
		return GlyphInFlight
	case pending.StateFailed:
		return GlyphFailed
	case pending.StateSucceeded:
		return GlyphSucceeded
	case pending.StateApplied:
		return GlyphApplied
	case pending.StateAbandoned:
		return GlyphAbandoned
	}
	return "?"
}

// findingGlyph is the glyph of a bulk query's finding.
func findingGlyph(f guard.Finding) string {
	switch f {
	case guard.FindingFound:
		return GlyphFound
	case guard.FindingNotFound:
		return GlyphNotFound
	case guard.FindingQueryFailed:
		return GlyphQueryFailed
	}
	return GlyphNoQuery
}

// stateWord is how a state reads on screen ("in flight", not "in_flight").
func stateWord(st pending.State) string {
	if st == pending.StateInFlight {
		return "in flight"
	}
	return string(st)
}

// stateLabel renders glyph and word in the state's colour.
func (s *Styles) stateLabel(st pending.State) string {
	return s.State[st].Render(stateGlyph(st) + " " + stateWord(st))
}
