//go:build spool_mongo

package main

// The MongoDB backend (mongodb://, lungo://) only in a binary built with
// -tags spool_mongo: the official driver and lungo add about 6.5 MB (16%)
// to the spool binary, which users of the SQL stores would carry for
// nothing. docs/mongo.md.
import _ "github.com/spoolq/spool/backend/mongo"
