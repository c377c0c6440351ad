#pragma once
#include <gtk/gtk.h>
#include <webkit/webkit.h>
#include <glib-unix.h>
#include <malloc.h>

// Variadic and macro-only parts of the GObject API, as functions Swift can call.
static inline GtkWidget *smw_web_view_new(WebKitWebContext *context, WebKitNetworkSession *session,
                                          WebKitUserContentManager *manager, WebKitSettings *settings) {
    return GTK_WIDGET(g_object_new(WEBKIT_TYPE_WEB_VIEW, "web-context", context, "network-session", session,
                                   "user-content-manager", manager, "settings", settings, NULL));
}

static inline gulong smw_connect(gpointer instance, const char *signal, GCallback handler, gpointer data) {
    return g_signal_connect_data(instance, signal, handler, data, NULL, (GConnectFlags)0);
}

static inline int smw_error_is(const GError *error, GQuark domain, int code) {
    return error != NULL && error->domain == domain && error->code == code;
}

static inline WebKitWebContext *smw_web_context_new(WebKitMemoryPressureSettings *settings) {
    return WEBKIT_WEB_CONTEXT(g_object_new(WEBKIT_TYPE_WEB_CONTEXT, "memory-pressure-settings", settings, NULL));
}


// The int64 a user message carries as its parameters (the web process extension's answer), if any.
static inline int smw_user_message_int64(WebKitUserMessage *message, gint64 *out) {
    GVariant *parameters = webkit_user_message_get_parameters(message);
    if (parameters == NULL || !g_variant_is_of_type(parameters, G_VARIANT_TYPE_INT64)) return 0;
    *out = g_variant_get_int64(parameters);
    return 1;
}
