package redislock

// The value format, for the external tests that read or forge lock keys.
type Value = value

// ParseValue is parseValue.
var ParseValue = parseValue
