package orchestrate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/lockstep-sandbox/lockstep/observer/kvmrecord"
	"github.com/lockstep-sandbox/lockstep/record"
)

// The record structs of package record say what type every field of a
// record has; these are the same fields without record's own decoding
// (which also refuses unknown members, and Phobos's records carry some),
// so that decoding into them checks the types and nothing else.
type (
	layerFields record.Exercise
	kvmRecord   kvmrecord.Record
	kvmFields   struct {
		kvmRecord
		Aborted  string         `json:"aborted"`
		Evidence map[string]any `json:"evidence"`
	}
)

// checkFieldTypes decodes data into typed (a pointer to layerFields or
// kvmFields) and refuses the first member of the wrong JSON type, naming
// the field and the type wanted: a check that reads a member as a list, or
// as a string, must not take a wrong-typed one for an empty or absent one.
func checkFieldTypes(data []byte, typed any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	err := dec.Decode(typed)
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := strings.TrimPrefix(te.Field, "kvmRecord.")
		return fmt.Errorf("has field %s of the wrong type: %s; want %s", field, article(te.Value), jsonKind(te.Type))
	}
	return err
}

// jsonKind names the JSON type a Go field type is read from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer:
		return jsonKind(t.Elem()) + " or null"
	case reflect.Slice, reflect.Array:
		return "a list (of " + plainKind(t.Elem()) + ")"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return plainKind(t)
}

func plainKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		if t == reflect.TypeFor[json.Number]() {
			return "a number"
		}
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "lists"
	case reflect.Map, reflect.Struct:
		return "objects"
	case reflect.Interface:
		return "any value"
	}
	return t.String()
}

// article spells encoding/json's description of a value ("object",
// "number 1.5") with an article.
func article(v string) string {
	switch {
	case v == "array":
		return "a list"
	case strings.ContainsAny(v[:min(1, len(v))], "aeiou"):
		return "an " + v
	}
	return "a " + v
}
