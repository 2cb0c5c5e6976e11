//go:build race

package logplayer

// raceEnabled: the race detector slows everything down several times, so
// volume tests shrink their default size.
const raceEnabled = true
