//go:build !race

package logplayer

const raceEnabled = false
