from django.urls import path

from plugins_admin import views

urlpatterns = [
    path("plugins/", views.plugins_page, name="plugins"),
]
