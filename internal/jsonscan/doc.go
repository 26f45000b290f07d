// Package jsonscan reads JSON in place, without decoding it: where a value ends, and the
// text of a string. Its input must have passed json.Valid. pusher's decoders of client
// messages and ingest's templates read records with it. Everything here is pure and safe for
// concurrent use.
package jsonscan
