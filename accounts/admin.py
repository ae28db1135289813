from django.contrib import admin

from .models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("name", "user", "prefix", "created_at", "last_used_at")
    list_filter = ("created_at",)
    search_fields = ("name", "user__username", "prefix")
    readonly_fields = ("prefix", "created_at", "last_used_at")
    exclude = ("key_hash",)
