#pragma once

/// GTK 4 ends the process on the loss of its display with _exit(1) and only a debug message
/// (X11) or a GDK message (Wayland). Makes `hook` run first, to write one log line, and then ends
/// the process the same way: for an X11 display (a GdkDisplay *) through an Xlib I/O error
/// handler, for a Wayland display through a watch on the compositor's socket. `hook` is told
/// which went: 1 (X11) or 2 (Wayland). Returns that number, or 0 when nothing was installed.
int smw_watch_display(void *display, void (*hook)(int kind));
