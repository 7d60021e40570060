package spool

import (
	"encoding/json"
	"testing"
)

// BenchmarkArgsChecks measures what the storability checks add to an
// insert: encoding a typical payload, then the one pass over its bytes.
func BenchmarkArgsChecks(b *testing.B) {
	type payload struct {
		UserID  int64    `json:"user_id"`
		Email   string   `json:"email"`
		Subject string   `json:"subject"`
		Tags    []string `json:"tags"`
	}
	args := RawArgs("email", nil)
	p := payload{UserID: 42, Email: "someone@example.com", Subject: "Your order has shipped: ünïcödé", Tags: []string{"a", "b"}}
	b.Run("encode", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(p); err != nil {
				b.Fatal(err)
			}
		}
	})
	encoded, _ := json.Marshal(p)
	b.Run("check", func(b *testing.B) {
		for b.Loop() {
			if why := checkArgsStorable(args, encoded); why != "" {
				b.Fatal(why)
			}
		}
	})
}
