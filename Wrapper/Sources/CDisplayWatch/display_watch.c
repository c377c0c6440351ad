#include "display_watch.h"
#include <gdk/x11/gdkx.h>
#include <gdk/wayland/gdkwayland.h>
#include <glib-unix.h>
#include <unistd.h>
#include <wayland-client.h>

static void (*display_lost_hook)(int kind);

static int on_x_io_error(Display *display) {
    (void)display;
    if (display_lost_hook) display_lost_hook(1);
    _exit(1);
}

/* The compositor hung up: before GDK's own event source sees it (this watch has a higher
   priority), the hook writes its line; then the process ends as GDK would end it. */
static gboolean on_wayland_hangup(gint fd, GIOCondition condition, gpointer data) {
    (void)fd; (void)condition; (void)data;
    if (display_lost_hook) display_lost_hook(2);
    _exit(1);
    return G_SOURCE_REMOVE;
}

int smw_watch_display(void *display, void (*hook)(int kind)) {
    if (display == NULL) return 0;
    if (GDK_IS_X11_DISPLAY(display)) {
        display_lost_hook = hook;
        XSetIOErrorHandler(on_x_io_error);
        return 1;
    }
    if (GDK_IS_WAYLAND_DISPLAY(display)) {
        struct wl_display *wl = gdk_wayland_display_get_wl_display(GDK_DISPLAY(display));
        if (wl == NULL) return 0;
        display_lost_hook = hook;
        g_unix_fd_add_full(G_PRIORITY_HIGH, wl_display_get_fd(wl), G_IO_HUP | G_IO_ERR, on_wayland_hangup, NULL, NULL);
        return 2;
    }
    return 0;
}
