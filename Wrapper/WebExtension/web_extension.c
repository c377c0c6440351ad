// smartico-wrapper's web process extension (docs/wrapper.md, "Rendering, memory and wake-ups"):
// WebKit loads it into every web process of the wrapper's web context (the wrapper hands it the
// directory: webkit_web_context_set_web_process_extensions_directory). Plain C, built by the
// package's WebExtensionBuild plugin: SwiftPM would link the Swift runtime into a library of its
// own, and nothing of the toolchain may reach the web process (nor is it in its sandbox).
// Once a page has been on screen, the wrapper asks each web process, with SMW_UNMAP_MESSAGE, to
// unmap the pages of its libraries' code and constants: most are those of what only ran while the
// process started (Mesa's driver and LLVM, opened with WebKit's EGL display, never drawn with
// under Skia's CPU renderer). Only the wrapper can ask: a page's scripts cannot send user messages.
#include <gmodule.h>
#include <string.h>
#include <webkit/webkit-web-process-extension.h>
#include "working_set.h"

// Once per process: what a page uses after that is its working set, mapped again on its own.
static gboolean unmapped;

static gboolean on_user_message(WebKitWebPage *page, WebKitUserMessage *message, gpointer data) {
    (void)page;
    (void)data;
    if (strcmp(webkit_user_message_get_name(message), SMW_UNMAP_MESSAGE) != 0) return FALSE;
    gint64 kib = 0;
    if (!unmapped) {
        unmapped = TRUE;
        kib = smw_unmap_library_pages();
    }
    webkit_user_message_send_reply(message, webkit_user_message_new(SMW_UNMAP_MESSAGE, g_variant_new_int64(kib)));
    return TRUE;
}

static void on_page_created(WebKitWebProcessExtension *extension, WebKitWebPage *page, gpointer data) {
    (void)extension;
    (void)data;
    g_signal_connect(page, "user-message-received", G_CALLBACK(on_user_message), NULL);
}

G_MODULE_EXPORT void webkit_web_process_extension_initialize(WebKitWebProcessExtension *extension) {
    g_signal_connect(extension, "page-created", G_CALLBACK(on_page_created), NULL);
}
