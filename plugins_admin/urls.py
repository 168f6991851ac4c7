from django.urls import path

from plugins_admin import views

urlpatterns = [
    path("plugins/", views.plugins_page, name="plugins"),
    path("plugins/replay/", views.replay_report_page, name="replay-report"),
    path("plugins/replay/chart.svg", views.replay_report_chart, name="replay-report-chart"),
]
