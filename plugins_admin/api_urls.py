from django.urls import path

from plugins_admin import apis, what_if_apis

urlpatterns = [
    path("plugins", apis.PluginListApi.as_view(), name="api-plugins"),
    path("plugins/history", apis.PluginHistoryApi.as_view(), name="api-plugin-history"),
    path("plugins/<str:name>", apis.PluginDetailApi.as_view(), name="api-plugin-detail"),
    path("scheduler/plugins", apis.SchedulerPluginsApi.as_view(), name="api-scheduler-plugins"),
    path("scheduler/what-if", what_if_apis.WhatIfApi.as_view(), name="api-scheduler-what-if"),
    path("notification-channels", apis.NotificationChannelListApi.as_view(), name="api-notification-channels"),
    path("notification-channels/<str:kind>", apis.NotificationChannelDetailApi.as_view(),
         name="api-notification-channel-detail"),
    path("notification-channels/<str:kind>/test", apis.NotificationChannelTestApi.as_view(),
         name="api-notification-channel-test"),
]
