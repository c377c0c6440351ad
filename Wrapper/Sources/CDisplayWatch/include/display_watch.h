#pragma once

/// GTK 4 ends the process on the loss of the X server with _exit(1) and only a debug message.
/// When `display` (a GdkDisplay *) is an X11 display, installs an Xlib I/O error handler that
/// calls `hook` first (to write one log line), then ends the process the same way. Returns 1 when
/// installed, 0 for another backend (Wayland's warns by itself).
int smw_watch_x11_display(void *display, void (*hook)(void));
