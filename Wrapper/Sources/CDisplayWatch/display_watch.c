#include "display_watch.h"
#include <gdk/x11/gdkx.h>
#include <unistd.h>

static void (*display_lost_hook)(void);

static int on_x_io_error(Display *display) {
    (void)display;
    if (display_lost_hook) display_lost_hook();
    _exit(1);
}

int smw_watch_x11_display(void *display, void (*hook)(void)) {
    if (display == NULL || !GDK_IS_X11_DISPLAY(display)) return 0;
    display_lost_hook = hook;
    XSetIOErrorHandler(on_x_io_error);
    return 1;
}
