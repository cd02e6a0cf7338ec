package tui

import (
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/charmbracelet/bubbles/key"
)

// Every key a screen, dialog or the app binds is in KeyTable (and so in
// the README): a binding added to a key map without a row fails here.
func TestKeyTableListsEveryBinding(t *testing.T) {
	table := KeyTable()
	for name, km := range map[string]any{
		"listKeys": defaultListKeys(), "detailKeys": defaultDetailKeys(), "toolsKeys": defaultToolsKeys(),
		"formKeys": defaultFormKeys(), "bulkKeys": defaultBulkKeys(), "dialogKeys": defaultDialogKeys(), "inputDialogKeys": defaultInputDialogKeys(),
		"filterKeys": defaultFilterKeys(), "appKeys": defaultAppKeys(), "loginKeys": defaultLoginKeys(),
	} {
		v := reflect.New(reflect.TypeOf(km)).Elem() // addressable, so embedded unexported maps can be read
		v.Set(reflect.ValueOf(km))
		for field, b := range bindings(v, "") {
			k := b.Help().Key
			if !strings.Contains(table, "| `"+k+"` |") {
				t.Errorf("%s.%s (key %q, %q) has no row in KeyTable:\n%s", name, field, k, b.Help().Desc, table)
			}
		}
	}
}

// bindings are the key.Binding fields of a key map, embedded ones included.
func bindings(v reflect.Value, prefix string) map[string]key.Binding {
	out := map[string]key.Binding{}
	for i := 0; i < v.NumField(); i++ {
		ft := v.Type().Field(i)
		f := reflect.NewAt(ft.Type, unsafe.Pointer(v.Field(i).UnsafeAddr())).Elem() // readable if unexported
		switch b := f.Interface().(type) {
		case key.Binding:
			out[prefix+ft.Name] = b
		default:
			if f.Kind() == reflect.Struct {
				for n, b := range bindings(f, prefix+ft.Name+".") {
					out[n] = b
				}
			}
		}
	}
	return out
}
